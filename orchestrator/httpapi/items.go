package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/critical"
)

// CriticalEvents is what the critical-event and item routes need from the
// critical-event service (critical.Service).
type CriticalEvents interface {
	Commit(ctx context.Context, ev record.CriticalEvent) (record.CriticalAck, error)
	CommitBatch(ctx context.Context, b mapcontract.CriticalBatch) (*mapcontract.CriticalBatchAnswer, error)
	InstanceItems(ctx context.Context, r mapcontract.InstanceItemsRequest) (*mapcontract.InstanceItemsAnswer, error)
	CharacterItems(ctx context.Context, r mapcontract.CharacterItemsRequest) (*mapcontract.CharacterItemsAnswer, error)
	InstancePolicies(ctx context.Context, r mapcontract.ItemPoliciesRequest) (*mapcontract.ItemPoliciesAnswer, error)
	Policies(ctx context.Context) ([]items.Policy, error)
	Policy(ctx context.Context, itemID string) (items.Policy, error)
	PutPolicy(ctx context.Context, itemID string, p items.Policy) (items.Policy, bool, error)
	DeletePolicy(ctx context.Context, itemID string) error
	Recoveries(ctx context.Context, itemID string, limit int) ([]orchestrator.ItemRecovery, error)
	Item(ctx context.Context, itemID string) (*orchestrator.ItemRecord, error)
	HeldItems(ctx context.Context, characterID string) ([]orchestrator.ItemRecord, error)
}

var _ CriticalEvents = (*critical.Service)(nil)

// Body limits: a policy with MaxAnchors anchors is a few KiB; a batch of critical events
// is bounded by MaxCriticalBatch item events of a few hundred bytes each (a full batch
// of maximal payloads is refused as too large: send fewer).
const (
	maxPolicyBody        = 64 << 10
	maxCriticalBatchBody = 1 << 20
)

// mapItemRoutes registers the map-facing critical-event and item routes.
func (s *Server) mapItemRoutes(g *echo.Group) {
	g.POST(mapcontract.PathPersistCritical, mapRPC(maxCriticalBody,
		func(r *record.CriticalEvent) string { return r.InstanceID }, s.Critical.Commit))
	g.POST(mapcontract.PathPersistCriticalBatch, mapRPC(maxCriticalBatchBody,
		func(r *mapcontract.CriticalBatch) string { return r.InstanceID }, s.Critical.CommitBatch))
	g.POST(mapcontract.PathInstanceItems, mapRPC(mapcontract.MaxInstanceItemsBody,
		func(r *mapcontract.InstanceItemsRequest) string { return r.InstanceID }, s.Critical.InstanceItems))
	g.POST(mapcontract.PathCharacterItems, mapRPC(httpkit.DefaultMaxBodySize,
		func(r *mapcontract.CharacterItemsRequest) string { return r.InstanceID }, s.Critical.CharacterItems))
	g.POST(mapcontract.PathItemPolicies, mapRPC(httpkit.DefaultMaxBodySize,
		func(r *mapcontract.ItemPoliciesRequest) string { return r.InstanceID }, s.Critical.InstancePolicies))
}

// adminItemRoutes registers the operators' item, policy and audit routes (root secret).
func (s *Server) adminItemRoutes(g *echo.Group) {
	g.GET(PathAdminItems, s.handleHeldItems)
	g.GET(PathAdminItems+"/:id", s.handleItem)
	g.GET(PathAdminItemPolicies, s.handleListPolicies)
	g.GET(PathAdminItemPolicies+"/:id", s.handleGetPolicy)
	g.PUT(PathAdminItemPolicies+"/:id", s.handlePutPolicy)
	g.DELETE(PathAdminItemPolicies+"/:id", s.handleDeletePolicy)
	g.GET(PathAdminItemRecoveries, s.handleRecoveries)
}

// handleItem answers one item: holder, place, last critical event.
func (s *Server) handleItem(c echo.Context) error {
	rec, err := s.Critical.Item(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rec)
}

// handleHeldItems answers the items a character holds: ?holder=<characterId> is
// required and is the only parameter, so that a misspelt query is refused rather than
// answered with everything or nothing.
func (s *Server) handleHeldItems(c echo.Context) error {
	q := c.QueryParams()
	for k := range q {
		if k != "holder" {
			return apierr.Errorf(apierr.EBADREQUEST, "unknown query parameter %.32q: GET %s takes ?holder=<characterId>", k, PathAdminItems)
		}
	}
	if len(q["holder"]) != 1 || q.Get("holder") == "" {
		return apierr.Errorf(apierr.EBADREQUEST, "GET %s needs ?holder=<characterId>, once (GET %s/{itemId} looks up one item)", PathAdminItems, PathAdminItems)
	}
	list, err := s.Critical.HeldItems(c.Request().Context(), q.Get("holder"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string][]orchestrator.ItemRecord{"items": list})
}

func (s *Server) handleListPolicies(c echo.Context) error {
	pols, err := s.Critical.Policies(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string][]items.Policy{"policies": pols})
}

func (s *Server) handleGetPolicy(c echo.Context) error {
	p, err := s.Critical.Policy(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

// handlePutPolicy creates (201) or replaces (200) a policy from a strictly decoded body.
func (s *Server) handlePutPolicy(c echo.Context) error {
	var p items.Policy
	if err := httpkit.DecodeJSON(c, &p, maxPolicyBody); err != nil {
		return err
	}
	p, created, err := s.Critical.PutPolicy(c.Request().Context(), c.Param("id"), p)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, p)
}

func (s *Server) handleDeletePolicy(c echo.Context) error {
	if err := s.Critical.DeletePolicy(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// handleRecoveries answers the recovery audit: ?itemId= filters, ?limit= bounds.
func (s *Server) handleRecoveries(c echo.Context) error {
	limit := 0
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return apierr.Errorf(apierr.EBADREQUEST, "limit must be a positive integer")
		}
		limit = n
	}
	list, err := s.Critical.Recoveries(c.Request().Context(), c.QueryParam("itemId"), limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string][]orchestrator.ItemRecovery{"recoveries": list})
}
