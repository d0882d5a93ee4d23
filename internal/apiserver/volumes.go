package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/spec"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Storage is the server's storage policy: each team's limit on the sizes
// of its volumes, and the datasets (host paths) workloads may mount.
type Storage struct {
	// Limit returns a team's storage limit in bytes, -1 for none; nil
	// sets none.
	Limit func(core.TeamName) int64
	// Datasets names the datasets an administrator allows (the paths
	// stay with the control loop).
	Datasets map[string]bool
}

func (st Storage) limit(team core.TeamName) int64 {
	if st.Limit == nil {
		return -1
	}
	return st.Limit(team)
}

func (s *Server) volumeOut(v core.Volume) api.Volume {
	return api.Volume{Team: string(v.Team), Name: v.Name, SizeBytes: v.SizeBytes, UsedBytes: v.UsedBytes,
		CreatedAt: v.CreatedAt.UTC(), MeasuredAt: v.MeasuredAt.UTC(), InUseBy: s.opts.Store.VolumeUsers(v.Team, v.Name)}
}

// createVolume answers POST /teams/{team}/volumes (members): a volume
// within the team's storage limit.
func (s *Server) createVolume(c *call) (reply, error) {
	team := core.TeamName(c.r.PathValue("team"))
	if err := c.authorize(team, "team", string(team)); err != nil {
		return reply{}, err
	}
	var in api.Volume
	if err := decode(c.r, &in); err != nil {
		return reply{}, err
	}
	c.setObject(in.Name)
	switch {
	case in.Team != "" && in.Team != string(team):
		return reply{}, invalid("team", "%q is not the team of the path (%s)", in.Team, team)
	case in.UsedBytes != 0 || !in.CreatedAt.IsZero() || !in.MeasuredAt.IsZero() || len(in.InUseBy) > 0:
		return reply{}, invalid("usedBytes", "usedBytes, createdAt, measuredAt and inUseBy are set by the server: give name and sizeBytes")
	}
	if fe := spec.CheckVolume(in); len(fe) > 0 {
		return reply{}, &fieldErrors{fields: fe}
	}
	v := core.Volume{Team: team, Name: in.Name, SizeBytes: in.SizeBytes, UsedBytes: -1, CreatedAt: s.opts.Now().UTC()}
	err := s.opts.Store.CreateVolume(c.r.Context(), v, s.opts.Storage.limit(team))
	switch {
	case errors.Is(err, store.ErrStorageLimit):
		return reply{}, invalid("sizeBytes", "%v", err)
	case errors.Is(err, core.ErrNotFound):
		return reply{}, notFound("team", string(team))
	case err != nil:
		return reply{}, err
	}
	return reply{status: http.StatusCreated, body: s.volumeOut(v)}, nil
}

// teamVolumes reads the volumes of a team the caller may read; a team
// that does not exist is a 404, for an admin too.
func (s *Server) teamVolumes(c *call, team core.TeamName) ([]core.Volume, error) {
	if err := c.authorize(team, "team", string(team)); err != nil {
		return nil, err
	}
	if _, err := s.opts.Store.Team(c.r.Context(), team); errors.Is(err, core.ErrNotFound) {
		return nil, notFound("team", string(team))
	} else if err != nil {
		return nil, err
	}
	return s.opts.Store.Volumes(c.r.Context(), team)
}

// listVolumes answers GET /teams/{team}/volumes.
func (s *Server) listVolumes(c *call) (reply, error) {
	team := core.TeamName(c.r.PathValue("team"))
	vs, err := s.teamVolumes(c, team)
	if err != nil {
		return reply{}, err
	}
	out := api.List[api.Volume]{Items: []api.Volume{}}
	for _, v := range vs {
		out.Items = append(out.Items, s.volumeOut(v))
	}
	return reply{status: http.StatusOK, body: out}, nil
}

// teamStorage answers GET /teams/{team}/storage: the team's volumes against
// its limit.
func (s *Server) teamStorage(c *call) (reply, error) {
	team := core.TeamName(c.r.PathValue("team"))
	vs, err := s.teamVolumes(c, team)
	if err != nil {
		return reply{}, err
	}
	out := api.StorageUsage{Team: string(team), Volumes: len(vs), LimitBytes: s.opts.Storage.limit(team)}
	for _, v := range vs {
		out.SizeBytes += v.SizeBytes
		out.UsedBytes += max(0, v.UsedBytes)
	}
	return reply{status: http.StatusOK, body: out}, nil
}

// deleteVolume answers DELETE /teams/{team}/volumes/{name} (team-admins):
// refused while a workload not ended mounts it; the data goes when the
// control loop next reconciles volumes.
func (s *Server) deleteVolume(c *call) (reply, error) {
	team := core.TeamName(c.r.PathValue("team"))
	name := c.r.PathValue("name")
	c.setObject(name)
	if err := c.authorize(team, "team", string(team)); err != nil {
		return reply{}, err
	}
	err := s.opts.Store.DeleteVolume(c.r.Context(), team, name, s.opts.Now())
	if errors.Is(err, core.ErrNotFound) {
		return reply{}, notFound("volume", string(team)+"/"+name)
	}
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusNoContent}, nil
}

// storageRefs checks what a submitted workload names of its team's storage
// and secrets, and copies it into w: secrets that exist (a secret for
// secretEnv must hold only keys that are environment variable names),
// volumes of its own team, datasets the server allows. Each problem names
// its field; nothing is stored.
func (s *Server) storageRefs(ctx context.Context, team core.TeamName, in *api.Workload, w *core.Workload) error {
	var errs []api.FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, api.FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	for _, refs := range []struct {
		field string
		names []string
		env   bool
	}{{"secretEnv", in.SecretEnv, true}, {"secretFiles", in.SecretFiles, false}} {
		for i, n := range refs.names {
			at := fmt.Sprintf("%s[%d]", refs.field, i)
			sec, err := s.opts.Store.Secret(ctx, team, n)
			if errors.Is(err, core.ErrNotFound) {
				bad(at, "team %s has no secret %s", team, n)
				continue
			} else if err != nil {
				return err
			}
			if refs.env {
				for _, k := range sec.Keys {
					if !core.EnvNameRE.MatchString(k) {
						bad(at, "secret %s has the key %q, which is no environment variable name: use it with secretFiles", n, k)
						break
					}
				}
			}
		}
	}
	for i, v := range in.Volumes {
		if _, err := s.opts.Store.Volume(ctx, team, v.Name); errors.Is(err, core.ErrNotFound) {
			bad(fmt.Sprintf("volumes[%d].name", i), "team %s has no volume %s (gpufleet create volume %s %s --size SIZE)", team, v.Name, team, v.Name)
		} else if err != nil {
			return err
		}
		w.Volumes = append(w.Volumes, core.VolumeMount{Name: v.Name, Path: v.Path, ReadOnly: v.ReadOnly})
	}
	for i, m := range in.Mounts {
		if !s.opts.Storage.Datasets[m.Dataset] {
			bad(fmt.Sprintf("mounts[%d].dataset", i), "no dataset %s on this server (%s)", m.Dataset, knownDatasets(s.opts.Storage.Datasets))
		}
		w.Datasets = append(w.Datasets, core.DatasetMount{Name: m.Dataset, Path: m.Path})
	}
	if len(errs) > 0 {
		return &fieldErrors{fields: errs}
	}
	w.SecretEnv, w.SecretFiles = in.SecretEnv, in.SecretFiles
	return nil
}

func knownDatasets(ds map[string]bool) string {
	if len(ds) == 0 {
		return "an administrator allows datasets in the server's configuration"
	}
	names := make([]string, 0, len(ds))
	for n := range ds {
		names = append(names, n)
	}
	slices.Sort(names)
	return "known: " + strings.Join(names, ", ")
}
