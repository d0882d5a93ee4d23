package apiserver

import (
	"errors"
	"net/http"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/spec"
	"github.com/gpufleet/gpufleet/internal/store"
)

// secretsOff is the answer of the secret routes on a server without a
// keyring.
var secretsOff = &refusal{msg: "this server keeps no secrets", kind: core.ErrUnavailable}

func secretOut(sec store.Secret) api.Secret {
	return api.Secret{Name: sec.Name, Team: string(sec.Team), Keys: sec.Keys, CreatedAt: sec.CreatedAt.UTC()}
}

// createSecret answers POST /teams/{team}/secrets (team-admins): the
// values are sealed at once and never answered.
func (s *Server) createSecret(c *call) (reply, error) {
	if s.opts.Secrets == nil {
		return reply{}, secretsOff
	}
	team := core.TeamName(c.r.PathValue("team"))
	if err := c.authorize(team, "team", string(team)); err != nil {
		return reply{}, err
	}
	var in api.Secret
	if err := decode(c.r, &in); err != nil {
		return reply{}, err
	}
	c.setObject(in.Name)
	if in.Team != "" && in.Team != string(team) {
		return reply{}, invalid("team", "%q is not the team of the path (%s)", in.Team, team)
	}
	if len(in.Keys) > 0 || !in.CreatedAt.IsZero() {
		return reply{}, invalid("keys", "keys and createdAt are set by the server: give data")
	}
	if fe := spec.CheckSecret(in); len(fe) > 0 {
		return reply{}, &fieldErrors{fields: fe}
	}
	sec, err := s.opts.Secrets.Create(c.r.Context(), team, in.Name, in.Data, s.opts.Now())
	if errors.Is(err, core.ErrNotFound) {
		return reply{}, notFound("team", string(team))
	}
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusCreated, body: secretOut(sec)}, nil
}

// listSecrets answers GET /teams/{team}/secrets: names and keys only.
func (s *Server) listSecrets(c *call) (reply, error) {
	team := core.TeamName(c.r.PathValue("team"))
	if err := c.authorize(team, "team", string(team)); err != nil {
		return reply{}, err
	}
	secs, err := s.opts.Store.Secrets(c.r.Context(), team)
	if err != nil {
		return reply{}, err
	}
	out := api.List[api.Secret]{Items: []api.Secret{}}
	for _, sec := range secs {
		out.Items = append(out.Items, secretOut(sec))
	}
	return reply{status: http.StatusOK, body: out}, nil
}

// deleteSecret answers DELETE /teams/{team}/secrets/{name} (team-admins).
func (s *Server) deleteSecret(c *call) (reply, error) {
	team := core.TeamName(c.r.PathValue("team"))
	name := c.r.PathValue("name")
	c.setObject(name)
	if err := c.authorize(team, "team", string(team)); err != nil {
		return reply{}, err
	}
	err := s.opts.Store.DeleteSecret(c.r.Context(), team, name)
	if errors.Is(err, core.ErrNotFound) {
		return reply{}, notFound("secret", string(team)+"/"+name)
	}
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusNoContent}, nil
}
