package httpapi

// The admin API on the control listener, for operators with the root secret: maps
// (create, list, restart, stop, release from quarantine), player sessions, the
// cleanup of stale state, characters, and the critical-item policies with their
// recovery audit, and who holds which item (see docs/supervision.md, Admin API).
const (
	PathAdminMaps           = "/admin/maps"
	PathAdminUpgrade        = "/admin/upgrade"
	PathAdminSessions       = "/admin/sessions"
	PathAdminCleanup        = "/admin/cleanup"
	PathAdminCharacters     = "/admin/characters"
	PathAdminItems          = "/admin/items"
	PathAdminItemPolicies   = "/admin/item-policies"
	PathAdminItemRecoveries = "/admin/item-recoveries"
)
