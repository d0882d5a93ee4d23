package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/spec"
)

func newCreateVolumeCmd(e *env) *cobra.Command {
	var size string
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "volume TEAM NAME --size SIZE",
		Short: "Create a team volume (members)",
		Long: `Create a volume of a team: storage its workloads mount with
submit --volume NAME:/path[:ro], kept until it is deleted. Its size counts
against the team's storage limit and is what the cost ledger bills; on
this machine it is a directory of the server's data directory (its use
measured, not enforced), on Kubernetes a PersistentVolumeClaim in the
team's namespace.`,
		Example: `  gpufleet create volume research data --size 100GiB
  gpufleet submit --team research --volume data:/data -- python3 train.py`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if size == "" {
				return usagef("create volume: --size is required (100GiB)")
			}
			b, err := quantity.ParseSizeBytes(size)
			if err != nil {
				return usagef("--size %q: %v", size, err)
			}
			v := api.Volume{Name: args[1], SizeBytes: b}
			if fe := spec.CheckVolume(v); len(fe) > 0 {
				return fieldUsage(fe)
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			got, err := c.CreateVolume(cmd.Context(), args[0], &v)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, got); ok {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "volume/%s created in %s (%s)\n", got.Name, args[0], formatBytes(got.SizeBytes))
			return err
		},
	}
	cmd.Flags().StringVar(&size, "size", "", "the volume's size: 100GiB, 2TiB, 512MiB")
	out = addOutputFlag(cmd, outTable, outJSON, outYAML)
	return cmd
}

func newDeleteVolumeCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "volume TEAM NAME",
		Short: "Delete a team volume and its data (team-admins)",
		Long: `Delete a volume of a team with its data (its team-admins, or an admin).
A volume that a pending or running workload mounts is refused, naming it.`,
		Example: `  gpufleet delete volume research data`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			if err := c.DeleteVolume(cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "volume/%s deleted\n", args[1])
			return err
		},
	}
}

// formatBytes renders a size in the largest binary unit that keeps one
// decimal: 100GiB, 1.5TiB, 12KiB; -1 is "-" (not measured).
func formatBytes(b int64) string {
	if b < 0 {
		return "-"
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, i := float64(b), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + units[i]
}

// teamsToList is the team given, or every team the caller sees.
func teamsToList(ctx context.Context, c *api.Client, team string) ([]string, error) {
	if team != "" {
		return []string{team}, nil
	}
	ts, err := c.Teams(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out, nil
}

// volumesOf lists the volumes of a team, or of every team the caller may
// read (a team it may not is skipped).
func volumesOf(ctx context.Context, c *api.Client, team string) ([]api.Volume, error) {
	teams, err := teamsToList(ctx, c, team)
	if err != nil {
		return nil, err
	}
	var out []api.Volume
	for _, t := range teams {
		vs, err := c.Volumes(ctx, t)
		var ae *api.StatusError
		if team == "" && errors.As(err, &ae) && ae.Status == 403 {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

// storageOf is the storage of a team, or of every team the caller may read.
func storageOf(ctx context.Context, c *api.Client, team string) ([]api.StorageUsage, error) {
	teams, err := teamsToList(ctx, c, team)
	if err != nil {
		return nil, err
	}
	var out []api.StorageUsage
	for _, t := range teams {
		s, err := c.Storage(ctx, t)
		var ae *api.StatusError
		if team == "" && errors.As(err, &ae) && ae.Status == 403 {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, *s)
	}
	return out, nil
}

func printVolumes(e *env, vs []api.Volume) error {
	t := newTable(e.stdout, "TEAM", "NAME", "SIZE", "USED", "IN USE BY", "AGE")
	for _, v := range vs {
		inUse := strings.Join(v.InUseBy, ",")
		if inUse == "" {
			inUse = "-"
		}
		t.row(v.Team, v.Name, formatBytes(v.SizeBytes), formatBytes(v.UsedBytes), inUse, formatAge(e.now(), v.CreatedAt))
	}
	return t.flush()
}

func printStorage(e *env, ss []api.StorageUsage) error {
	t := newTable(e.stdout, "TEAM", "VOLUMES", "SIZE", "USED", "LIMIT")
	for _, s := range ss {
		limit := "unlimited"
		if s.LimitBytes >= 0 {
			limit = formatBytes(s.LimitBytes)
		}
		t.row(s.Team, strconv.Itoa(s.Volumes), formatBytes(s.SizeBytes), formatBytes(s.UsedBytes), limit)
	}
	return t.flush()
}
