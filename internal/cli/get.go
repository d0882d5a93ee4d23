package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
)

func newGetCmd(e *env) *cobra.Command {
	var opts api.ListOptions
	var out *outputFlag
	var watch bool
	var node string // get evidence --node
	var expand bool // get workloads --expand: a row per array task
	cmd := &cobra.Command{
		Use:   "get workloads|workload ID|NAME|nodes|teams|priorityclasses|users|user NAME|members TEAM|prices|budgets|secrets|volumes|storage|clusters|pools|servers|evidence --node NODE",
		Short: "List workloads, nodes, teams, users or a team's members, or show one workload",
		Long: `List workloads, nodes, teams, users (admin only) or a team's members, or show
one workload or user.

-o json and -o yaml print what the API returns: {"items": [...]} with every
matching object for lists (all pages are read; --limit asks for fewer), the
object itself for one workload. -o wide adds columns, and for nodes a row per
GPU. Team quantities are in GPUs: the guarantee, the limit, what the team's
running workloads hold (USAGE), its fair share of the capacity and what its
pending workloads ask for; -o wide adds the priority classes each team may use
("preemptible": every preemptible class, the default). Users show their
teams as TEAM:ROLE; members their role in the team.

A job array (submit --array) is one row: its ID, its name with its range
("sweep[0-999%50]") and its tasks counted by phase ("Pending 940 Running 50
Succeeded 10"); --expand lists each task (ARRAYID-INDEX) instead. -o json and
yaml list every task.

Nodes show their lifecycle state (STATUS: Registering, Validating, Ready,
Cordoned, Draining, Failed or Lost) and their GPUs' health ("4/4 healthy",
"3/4 healthy, 1 failed"); -o wide gives each GPU's health and its reason.
get evidence --node NODE lists the node's qualification commands, each with
its result; -o json adds their raw outputs, as the API returns them.`,
		Example: `  gpufleet get workloads --team research --phase Running
  gpufleet get workload wl-0042 -o json
  gpufleet get nodes -o wide
  gpufleet get evidence --node gpu-a -o json
  gpufleet get teams
  gpufleet get members research -o json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 || len(args) > 2 {
				return usagef("get what? want %s", getKinds)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			kind := args[0]
			isWorkloads := kind == "workloads" || kind == "workload" || kind == "wl"
			byTeam := slices.Contains([]string{"secrets", "secret", "volumes", "volume", "storage"}, kind)
			if !isWorkloads && (opts.Phase != "" || opts.Limit != 0 || (opts.Team != "" && !byTeam)) {
				return usagef("--team, --phase and --limit apply to workloads only (and --team to secrets, volumes and storage)")
			}
			// get evidence --node (node.go).
			isEvidence := kind == "evidence"
			switch {
			case isEvidence && node == "":
				return usagef("get evidence --node NODE: which node?")
			case !isEvidence && node != "":
				return usagef("--node applies to evidence only")
			}
			if opts.Limit < 0 {
				return usagef("--limit %d: must not be negative", opts.Limit)
			}
			isUsers := kind == "users" || kind == "user"
			isMembers := kind == "members" || kind == "member"
			switch {
			case isMembers && len(args) != 2:
				return usagef("get members TEAM: which team?")
			case len(args) == 2 && !isWorkloads && !isUsers && !isMembers:
				return usagef("get %s takes no name", kind)
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			switch {
			case isWorkloads && len(args) == 2:
				w, err := resolveWorkload(ctx, c, e.now(), args[1], opts.Team)
				if err != nil {
					return err
				}
				if ok, err := out.structured(e.stdout, w); ok {
					return err
				}
				return printWorkloads(e, out.value, []api.Workload{*w})
			case isWorkloads:
				if opts.Phase, err = parsePhases(opts.Phase); err != nil {
					return err
				}
				if watch {
					if out.value == outYAML {
						return usagef("--watch prints a table or one JSON object per line: want -o table, wide or json")
					}
					return watchWorkloads(ctx, e, c, opts, out.value)
				}
				ws, err := c.AllWorkloads(ctx, opts)
				if err != nil {
					return err
				}
				if len(ws) == 0 && opts.Team != "" {
					if err := checkTeam(ctx, c, opts.Team); err != nil {
						return err // a mistyped team, not an empty one
					}
				}
				if opts.Limit > 0 && len(ws) > opts.Limit {
					ws = ws[:opts.Limit]
				}
				if ok, err := out.structured(e.stdout, list(ws)); ok {
					return err
				}
				if !expand {
					ws = foldArrays(ws)
				}
				return printWorkloads(e, out.value, ws)
			case kind == "nodes" || kind == "node":
				ns, err := c.Nodes(ctx)
				if err != nil {
					return err
				}
				if ok, err := out.structured(e.stdout, list(ns)); ok {
					return err
				}
				return printNodes(e, out.value, ns)
			case isEvidence:
				ev, err := c.NodeEvidence(ctx, node)
				if err != nil {
					return err
				}
				if ok, err := out.structured(e.stdout, ev); ok {
					return err
				}
				return printEvidence(e, out.value, ev.Items)
			case kind == "teams" || kind == "team":
				ts, err := c.Teams(ctx)
				if err != nil {
					return err
				}
				if ok, err := out.structured(e.stdout, list(ts)); ok {
					return err
				}
				return printTeams(e, out.value, ts)
			case kind == "priorityclasses" || kind == "priorityclass" || kind == "pc":
				pcs, err := c.PriorityClasses(ctx)
				if err != nil {
					return err
				}
				if ok, err := out.structured(e.stdout, list(pcs)); ok {
					return err
				}
				t := newTable(e.stdout, "NAME", "VALUE", "PREEMPTIBLE", "MAY-BORROW", "IDLE-ONLY")
				for _, pc := range pcs {
					t.row(pc.Name, strconv.Itoa(pc.Value), strconv.FormatBool(pc.Preemptible), strconv.FormatBool(pc.MayBorrow), strconv.FormatBool(pc.IdleOnly))
				}
				return t.flush()
			case isUsers && len(args) == 2:
				u, err := c.User(ctx, args[1])
				if err != nil {
					return err
				}
				if ok, err := out.structured(e.stdout, u); ok {
					return err
				}
				return printUsers(e, out.value, []api.User{*u})
			case isUsers:
				us, err := c.Users(ctx)
				if err != nil {
					return err
				}
				if ok, err := out.structured(e.stdout, list(us)); ok {
					return err
				}
				return printUsers(e, out.value, us)
			case kind == "clusters" || kind == "cluster":
				cs, err := c.Clusters(ctx)
				if err != nil {
					return err
				}
				if ok, err := out.structured(e.stdout, list(cs)); ok {
					return err
				}
				return printClusters(e, cs)
			case kind == "servers" || kind == "server":
				ss, err := c.Servers(ctx)
				if err != nil {
					return err
				}
				if ok, err := out.structured(e.stdout, list(ss)); ok {
					return err
				}
				return printServers(e, ss)
			case kind == "pools" || kind == "pool":
				ps, err := c.Pools(ctx)
				if err != nil {
					return err
				}
				if ok, err := out.structured(e.stdout, list(ps)); ok {
					return err
				}
				return printPools(e, ps)
			case kind == "prices" || kind == "price":
				ps, err := c.Prices(ctx)
				if err != nil {
					return err
				}
				if ok, err := out.structured(e.stdout, ps); ok {
					return err
				}
				return printPrices(e, ps)
			case kind == "secrets" || kind == "secret":
				if opts.Team == "" {
					return usagef("get secrets --team TEAM: which team?")
				}
				ss, err := c.Secrets(ctx, opts.Team)
				if err != nil {
					return err
				}
				if ok, err := out.structured(e.stdout, list(ss)); ok {
					return err
				}
				return printSecrets(e, ss)
			case kind == "volumes" || kind == "volume":
				vs, err := volumesOf(ctx, c, opts.Team)
				if err != nil {
					return err
				}
				if ok, err := out.structured(e.stdout, list(vs)); ok {
					return err
				}
				return printVolumes(e, vs)
			case kind == "storage":
				ss, err := storageOf(ctx, c, opts.Team)
				if err != nil {
					return err
				}
				if ok, err := out.structured(e.stdout, list(ss)); ok {
					return err
				}
				return printStorage(e, ss)
			case kind == "budgets" || kind == "budget":
				bs, err := c.Budgets(ctx)
				if err != nil {
					return err
				}
				if ok, err := out.structured(e.stdout, bs); ok {
					return err
				}
				return printBudgets(e, bs)
			case isMembers:
				us, err := c.Members(ctx, args[1])
				if err != nil {
					return err
				}
				if ok, err := out.structured(e.stdout, list(us)); ok {
					return err
				}
				return printMembers(e, args[1], us)
			default:
				return usagef("get %q: want %s", kind, getKinds)
			}
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Team, "team", "", "only workloads of this team")
	fl.StringVar(&opts.Phase, "phase", "", "only workloads in these phases, comma-separated, in any case (Pending, Running, Succeeded, Failed, Cancelled)")
	fl.IntVar(&opts.Limit, "limit", 0, "at most this many workloads (default all)")
	fl.StringVar(&node, "node", "", "the node whose evidence to list (get evidence)")
	fl.BoolVar(&expand, "expand", false, "a row per task of each job array (default: one row per array, its tasks counted by phase)")
	fl.BoolVarP(&watch, "watch", "w", false, "after the list, print each workload that appears or changes, until interrupted (-o json: one object per line)")
	out = addOutputFlag(cmd, outTable, outWide, outJSON, outYAML)
	return cmd
}

// getKinds lists what get knows, for usage errors.
const getKinds = "workloads, workload ID, nodes, teams, priorityclasses, users, user NAME, members TEAM, prices, budgets, secrets --team TEAM, volumes, storage, clusters, pools, servers or evidence --node NODE"

func printWorkloads(e *env, format string, ws []api.Workload) error {
	header := []string{"ID", "NAME", "TEAM", "PRIORITY", "GPUS", "PHASE", "REASON", "EXIT", "ATTEMPTS", "NODE", "AGE"}
	if format == outWide {
		header = append(header, "KIND", "OWNER", "MESSAGE")
	}
	t := newTable(e.stdout, header...)
	for _, w := range ws {
		s := w.Status
		ask := formatGPURequest(w.Resources)
		if w.Replicas > 1 {
			ask = strconv.Itoa(w.Replicas) + "×" + ask // a gang: replicas × each one's GPUs, "3×1", as the portal shows it
		}
		name := w.Name
		if n := w.Native; n != nil {
			name = n.Namespace + "/" + n.Name // pods made with kubectl: where they are
		}
		row := []string{w.ID, name, w.Team, w.Priority, ask, s.Phase, s.Reason,
			formatExitCode(s.ExitCode), strconv.Itoa(s.Attempts), placementNodes(s.Placement), formatAge(e.now(), w.CreatedAt)}
		if format == outWide {
			row = append(row, w.Kind, w.Owner, s.Message)
		}
		t.row(row...)
	}
	return t.flush()
}

// printTeams prints a row per team, quantities in GPUs; -o wide adds the
// age and the priority classes the team may use.
func printTeams(e *env, format string, ts []api.Team) error {
	header := []string{"NAME", "GUARANTEED", "LIMIT", "WEIGHT", "USAGE", "FAIR-SHARE", "PENDING"}
	if format == outWide {
		header = append(header, "AGE", "PRIORITY-CLASSES")
	}
	t := newTable(e.stdout, header...)
	for _, tm := range ts {
		limit := "unlimited"
		if l := tm.LimitMilliGPU; l != nil && *l >= 0 {
			limit = api.Milli(*l).String()
		}
		weight := tm.Weight
		if weight == 0 {
			weight = 1 // the default, which the server may leave out
		}
		row := []string{tm.Name, api.Milli(tm.GuaranteedMilliGPU).String(), limit, strconv.FormatInt(weight, 10),
			api.Milli(tm.UsageMilliGPU).String(), api.Milli(tm.FairShareMilliGPU).String(), api.Milli(tm.PendingMilliGPU).String()}
		if format == outWide {
			classes := "preemptible" // none named: every preemptible class
			if len(tm.PriorityClasses) > 0 {
				classes = strings.Join(tm.PriorityClasses, ",")
			}
			row = append(row, formatAge(e.now(), tm.CreatedAt), classes)
		}
		t.row(row...)
	}
	return t.flush()
}

// printNodes prints a row per node and, with -o wide, a row per GPU under
// it.
func printNodes(e *env, format string, ns []api.Node) error {
	wide := format == outWide
	header := []string{"NAME", "STATUS", "GPUS", "HEALTH", "ALLOCATED", "SCHEDULABLE"}
	if wide {
		header = append(header, "GPU-MEMORY", "UTIL", "MEM-USED", "POOL", "UUID", "WORKLOADS")
	}
	t := newTable(e.stdout, header...)
	for _, n := range ns {
		var milli, memAlloc, memTotal int64
		for _, g := range n.GPUs {
			milli += g.AllocatedMilliGPU
			memAlloc += g.AllocatedMemoryMiB
			memTotal += g.MemoryMiB
		}
		row := []string{n.Name, n.State, gpuModels(n.GPUs), healthSummary(n.GPUs), fmt.Sprintf("%s/%d", api.Milli(milli), len(n.GPUs)), strconv.FormatBool(n.Schedulable)}
		if !wide {
			t.row(row...)
			continue
		}
		util, used := nodeUse(n.GPUs)
		t.row(append(row, formatMiB(memAlloc)+"/"+formatMiB(memTotal), util, used, n.Pool, "", "")...)
		for _, g := range n.GPUs {
			var holders []string
			for _, a := range g.Allocations {
				holders = append(holders, a.WorkloadID+"@"+api.Milli(a.MilliGPU).String())
			}
			t.row(fmt.Sprintf("  %s/%d", n.Name, g.Index), " ", g.Model, gpuHealth(g), fmt.Sprintf("%s/1", api.Milli(g.AllocatedMilliGPU)),
				" ", formatMiB(g.AllocatedMemoryMiB)+"/"+formatMiB(g.MemoryMiB), formatUtil(g.Utilization), formatUsedMiB(g.MemoryUsedMiB),
				" ", g.UUID, strings.Join(holders, ",")) // " ": blank, not "-"
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	// A node that cannot keep workloads apart says so under the table
	// (its isolation ends with what is missing, in parentheses).
	for _, n := range ns {
		if strings.HasSuffix(n.Isolation, ")") {
			fmt.Fprintf(e.stderr, "warning: node %s does not fully isolate workloads: %s\n", n.Name, n.Isolation)
		}
	}
	return nil
}

// nodeUse is a node's sampled use: the mean utilisation of its sampled GPUs
// and their memory in use ("-" when none was sampled).
func nodeUse(gs []api.GPU) (util, used string) {
	var sum float64
	var mem int64
	n := 0
	for _, g := range gs {
		if g.Utilization == nil {
			continue
		}
		n++
		sum += *g.Utilization
		if g.MemoryUsedMiB != nil {
			mem += *g.MemoryUsedMiB
		}
	}
	if n == 0 {
		return "", ""
	}
	mean := sum / float64(n)
	return formatUtil(&mean), formatUsedMiB(&mem)
}

// formatUtil prints a sampled utilisation as a percentage ("" when it was
// never sampled, which the table shows as "-").
func formatUtil(u *float64) string {
	if u == nil {
		return ""
	}
	return strconv.FormatFloat(*u*100, 'f', 0, 64) + "%"
}

func formatUsedMiB(m *int64) string {
	if m == nil {
		return ""
	}
	return formatMiB(*m)
}

// gpuModels summarises a node's GPUs as counts per model: "4x H100" or
// "2x H100, 2x A10".
func gpuModels(gs []api.GPU) string {
	if len(gs) == 0 {
		return "0"
	}
	var models []string
	count := map[string]int{}
	for _, g := range gs {
		if count[g.Model] == 0 {
			models = append(models, g.Model)
		}
		count[g.Model]++
	}
	parts := make([]string, len(models))
	for i, m := range models {
		parts[i] = fmt.Sprintf("%dx %s", count[m], m)
	}
	return strings.Join(parts, ", ")
}
