package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator"
)

// Characters is what the character API needs from the admission service. Every method
// takes the caller's raw authKey, which it hashes at once and never keeps.
type Characters interface {
	Characters(ctx context.Context, authKey string) ([]orchestrator.CharacterSummary, error)
	CreateCharacter(ctx context.Context, authKey, name string) (orchestrator.CharacterSummary, error)
	SelectCharacter(ctx context.Context, authKey, characterID string) error
	DeleteCharacter(ctx context.Context, authKey, characterID string) error
}

// Sessions is what the admin session routes need from the admission service.
type Sessions interface {
	Sessions(ctx context.Context) ([]orchestrator.Session, error)
	Cleanup(ctx context.Context) (orchestrator.CleanupResult, error)
}

// SaveAudit is what GET /admin/characters/{id}/saves needs from the store.
type SaveAudit interface {
	CharacterSaves(ctx context.Context, characterID string) ([]orchestrator.CharacterSave, error)
}

// CreateCharacterRequest is the body of POST /api/v1/characters.
type CreateCharacterRequest struct {
	Name string `json:"name"`
}

// CharacterList is the answer of GET /api/v1/characters.
type CharacterList struct {
	Characters []orchestrator.CharacterSummary `json:"characters"`
}

// characterRoutes registers the character API on g.
func (s *Server) characterRoutes(g interface {
	GET(string, echo.HandlerFunc, ...echo.MiddlewareFunc) *echo.Route
	POST(string, echo.HandlerFunc, ...echo.MiddlewareFunc) *echo.Route
	DELETE(string, echo.HandlerFunc, ...echo.MiddlewareFunc) *echo.Route
}) {
	g.GET(public.PathCharacters, s.bearer(s.handleListCharacters))
	g.POST(public.PathCharacters, s.bearer(s.handleCreateCharacter))
	g.POST(public.PathCharacters+"/:id/select", s.bearer(s.handleSelectCharacter))
	g.DELETE(public.PathCharacters+"/:id", s.bearer(s.handleDeleteCharacter))
}

// authKeyOf returns the key of an "Authorization: Bearer <authKey>" header, or "".
func authKeyOf(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) < 7 || !strings.EqualFold(h[:7], "bearer ") {
		return ""
	}
	return strings.TrimSpace(h[7:])
}

// bearer answers an unauthorized call of the character API with the WWW-Authenticate
// challenge of RFC 6750 (the scheme the key is to be sent with), which the edge passes
// on with the answer.
func (s *Server) bearer(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		if apierr.Code(err) == apierr.EUNAUTHORIZED {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="mapyard"`)
		}
		return err
	}
}

func (s *Server) handleListCharacters(c echo.Context) error {
	list, err := s.Characters.Characters(c.Request().Context(), authKeyOf(c.Request()))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, CharacterList{Characters: list})
}

func (s *Server) handleCreateCharacter(c echo.Context) error {
	key := authKeyOf(c.Request())
	if key == "" { // refused before the body, whatever it holds
		_, err := s.Characters.Characters(c.Request().Context(), key)
		return err
	}
	var r CreateCharacterRequest
	if err := httpkit.DecodeJSON(c, &r, maxJoinBody); err != nil {
		return err
	}
	ch, err := s.Characters.CreateCharacter(c.Request().Context(), key, r.Name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, ch)
}

func (s *Server) handleSelectCharacter(c echo.Context) error {
	id := c.Param("id")
	if err := s.Characters.SelectCharacter(c.Request().Context(), authKeyOf(c.Request()), id); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"characterId": id, "selected": true})
}

func (s *Server) handleDeleteCharacter(c echo.Context) error {
	if err := s.Characters.DeleteCharacter(c.Request().Context(), authKeyOf(c.Request()), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// handleAdminSessions lists every character holding a lease (see orchestrator.Session).
func (s *Server) handleAdminSessions(c echo.Context) error {
	list, err := s.Sessions.Sessions(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string][]orchestrator.Session{"sessions": list})
}

// handleAdminCleanup removes expired nonces, finished transfers and stale guest leases
// and answers how many of each.
func (s *Server) handleAdminCleanup(c echo.Context) error {
	res, err := s.Sessions.Cleanup(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

// handleAdminSaves lists a character's save audit trail, newest first.
func handleAdminSaves(store SaveAudit) echo.HandlerFunc {
	return func(c echo.Context) error {
		list, err := store.CharacterSaves(c.Request().Context(), c.Param("id"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string][]orchestrator.CharacterSave{"saves": list})
	}
}
