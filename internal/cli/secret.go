package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/spec"
)

func newCreateSecretCmd(e *env) *cobra.Command {
	var literals, files []string
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "secret TEAM NAME (--from-literal KEY=VALUE | --from-file KEY=PATH)...",
		Short: "Create a team secret (team-admins)",
		Long: `Create a secret of a team (its team-admins, or an admin): keys and values that
workloads of the team get as environment variables (submit --secret-env NAME).
The server seals the values at once (AES-256-GCM, its key in a file of its
own); no answer, log, event, audit entry or describe shows a value again,
and the store keeps none in clear. A key is an environment variable name;
at most 1 MiB in all. To change a secret, delete it and create it again.`,
		Example: `  gpufleet create secret research hf --from-literal HF_TOKEN=hf_abc123
  gpufleet create secret research db --from-file PGPASSWORD=./pgpass`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			s := api.Secret{Name: args[1], Data: map[string]string{}}
			for _, l := range literals {
				k, v, ok := strings.Cut(l, "=")
				if !ok {
					return usagef("--from-literal %q: want KEY=VALUE", strings.SplitN(l, "=", 2)[0])
				}
				s.Data[k] = v
			}
			for _, f := range files {
				k, path, ok := strings.Cut(f, "=")
				if !ok {
					return usagef("--from-file %q: want KEY=PATH", f)
				}
				b, err := os.ReadFile(path)
				if err != nil {
					return usagef("--from-file %s: %v", k, err)
				}
				s.Data[k] = string(b)
			}
			if fe := spec.CheckSecret(s); len(fe) > 0 {
				return fieldUsage(fe)
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			got, err := c.CreateSecret(cmd.Context(), args[0], &s)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, got); ok {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "secret/%s created in %s (keys %s)\n", got.Name, args[0], strings.Join(got.Keys, ", "))
			return err
		},
	}
	cmd.Flags().StringArrayVar(&literals, "from-literal", nil, "KEY=VALUE (repeatable)")
	cmd.Flags().StringArrayVar(&files, "from-file", nil, "KEY=PATH: the value is the file's content (repeatable)")
	out = addOutputFlag(cmd, outTable, outJSON, outYAML)
	return cmd
}

func newDeleteSecretCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "secret TEAM NAME",
		Short:   "Delete a team secret (team-admins)",
		Example: `  gpufleet delete secret research hf`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			if err := c.DeleteSecret(cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "secret/%s deleted\n", args[1])
			return err
		},
	}
}

func printSecrets(e *env, ss []api.Secret) error {
	t := newTable(e.stdout, "NAME", "KEYS", "AGE")
	for _, s := range ss {
		t.row(s.Name, strings.Join(s.Keys, ","), formatAge(e.now(), s.CreatedAt))
	}
	return t.flush()
}
