package cli

import (
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
)

func newAuditCmd(e *env) *cobra.Command {
	var out *outputFlag
	var since, user string
	var limit int
	cmd := &cobra.Command{
		Use:   "audit [--since 1h|TIME] [--user NAME] [--limit N]",
		Short: "Show the audit trail of changes (admin only)",
		Long: `Show the audit trail (admin only): every request that changes something, or
tried to, oldest first: when, who, in what role, what, on which object and
team, and the HTTP status answered. Failed requests are recorded too (403,
404, 429...); -o wide adds the method, the path and the error message.

--since takes a duration back from now (90m, 24h, 7d) or an RFC 3339 time.
All pages are read; --limit keeps the first N entries.`,
		Example: `  gpufleet audit --since 24h
  gpufleet audit --user alice --since 2025-06-01T00:00:00Z -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			o := api.AuditOptions{User: user, Limit: limit}
			if limit < 0 {
				return usagef("--limit %d: must not be negative", limit)
			}
			if cmd.Flags().Changed("since") {
				t, err := parseSince(e.now(), since)
				if err != nil {
					return err
				}
				o.Since = t
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			entries, err := c.Audit(cmd.Context(), o)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, list(entries)); ok {
				return err
			}
			header := []string{"TIME", "USER", "ROLE", "ACTION", "OBJECT", "TEAM", "STATUS"}
			if out.value == outWide {
				header = append(header, "METHOD", "PATH", "MESSAGE")
			}
			t := newTable(e.stdout, header...)
			for _, a := range entries {
				row := []string{formatTime(&a.Time), a.User, a.Role, a.Action, a.Object, a.Team, strconv.Itoa(a.Status)}
				if out.value == outWide {
					row = append(row, a.Method, a.Path, a.Message)
				}
				t.row(row...)
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "only entries since this long ago (1h, 7d) or this RFC 3339 time (default all)")
	cmd.Flags().StringVar(&user, "user", "", "only this user's requests")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many entries, the oldest first (default all)")
	out = addOutputFlag(cmd, outTable, outWide, outJSON, outYAML)
	return cmd
}

// parseSince reads --since: a duration back from now, or an RFC 3339 time.
func parseSince(now time.Time, s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := parseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, usagef("--since %q: want a duration such as 1h or 7d, or an RFC 3339 time such as 2025-06-01T12:00:00Z", s)
	}
	return now.Add(-d), nil
}
