package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

func newGetCmd(e *env) *cobra.Command {
	g := &getRun{e: e}
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
			if err := g.out.check(); err != nil {
				return err
			}
			res, ok := getResourceNamed(args[0])
			if !ok {
				return usagef("get %q: want %s", args[0], getKinds)
			}
			if err := res.check(g, args); err != nil {
				return err
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			g.ctx, g.c, g.args = cmd.Context(), c, args
			return res.run(g)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&g.opts.Team, "team", "", "only workloads of this team")
	fl.StringVar(&g.opts.Phase, "phase", "", "only workloads in these phases, comma-separated, in any case (Pending, Running, Succeeded, Failed, Cancelled)")
	fl.IntVar(&g.opts.Limit, "limit", 0, "at most this many workloads (default all)")
	fl.StringVar(&g.node, "node", "", "the node whose evidence to list (get evidence)")
	fl.BoolVar(&g.expand, "expand", false, "a row per task of each job array (default: one row per array, its tasks counted by phase)")
	fl.BoolVarP(&g.watch, "watch", "w", false, "after the list, print each workload that appears or changes, until interrupted (-o json: one object per line)")
	g.out = addOutputFlag(cmd, outTable, outWide, outJSON, outYAML)
	return cmd
}

// getRun is one run of get: its flags, its arguments, the client.
type getRun struct {
	e      *env
	out    *outputFlag
	opts   api.ListOptions
	node   string // get evidence --node
	expand bool   // get workloads --expand: a row per array task
	watch  bool
	ctx    context.Context
	c      *api.Client
	args   []string
}

// Whether a resource takes a name after its kind.
const (
	noName = iota
	maybeName
	needsName
)

// getResource is one kind of object get lists or shows, as kubectl's
// resource table: the names it answers to (the first is its own), whether
// it takes a name, which of get's flags apply, and how it is read and
// printed.
type getResource struct {
	names []string
	name  int    // noName, maybeName or needsName
	what  string // what the name is, for "get members TEAM: which team?"
	team  bool   // --team applies (a filter, or which team)
	run   func(g *getRun) error
}

// getResources is every kind get knows.
var getResources = []getResource{
	{names: []string{"workloads", "workload", "wl"}, name: maybeName, team: true, run: getWorkloads},
	{names: []string{"nodes", "node"}, run: func(g *getRun) error {
		ns, err := g.c.Nodes(g.ctx)
		return showList(g, ns, err, func() error { return printNodes(g.e, g.out.value, ns) })
	}},
	{names: []string{"evidence"}, run: func(g *getRun) error {
		ev, err := g.c.NodeEvidence(g.ctx, g.node)
		return show(g, ev, err, func() error { return printEvidence(g.e, g.out.value, ev.Items) })
	}},
	{names: []string{"teams", "team"}, run: func(g *getRun) error {
		ts, err := g.c.Teams(g.ctx)
		return showList(g, ts, err, func() error { return printTeams(g.e, g.out.value, ts) })
	}},
	{names: []string{"priorityclasses", "priorityclass", "pc"}, run: func(g *getRun) error {
		pcs, err := g.c.PriorityClasses(g.ctx)
		return showList(g, pcs, err, func() error { return printPriorityClasses(g.e, pcs) })
	}},
	{names: []string{"users", "user"}, name: maybeName, run: getUsers},
	{names: []string{"members", "member"}, name: needsName, what: "TEAM", run: func(g *getRun) error {
		us, err := g.c.Members(g.ctx, g.args[1])
		return showList(g, us, err, func() error { return printMembers(g.e, g.args[1], us) })
	}},
	{names: []string{"clusters", "cluster"}, run: func(g *getRun) error {
		cs, err := g.c.Clusters(g.ctx)
		return showList(g, cs, err, func() error { return printClusters(g.e, cs) })
	}},
	{names: []string{"servers", "server"}, run: func(g *getRun) error {
		ss, err := g.c.Servers(g.ctx)
		return showList(g, ss, err, func() error { return printServers(g.e, ss) })
	}},
	{names: []string{"pools", "pool"}, run: func(g *getRun) error {
		ps, err := g.c.Pools(g.ctx)
		return showList(g, ps, err, func() error { return printPools(g.e, ps) })
	}},
	{names: []string{"prices", "price"}, run: func(g *getRun) error {
		ps, err := g.c.Prices(g.ctx)
		return show(g, ps, err, func() error { return printPrices(g.e, ps) })
	}},
	{names: []string{"secrets", "secret"}, team: true, run: func(g *getRun) error {
		if g.opts.Team == "" {
			return usagef("get secrets --team TEAM: which team?")
		}
		ss, err := g.c.Secrets(g.ctx, g.opts.Team)
		return showList(g, ss, err, func() error { return printSecrets(g.e, ss) })
	}},
	{names: []string{"volumes", "volume"}, team: true, run: func(g *getRun) error {
		vs, err := volumesOf(g.ctx, g.c, g.opts.Team)
		return showList(g, vs, err, func() error { return printVolumes(g.e, vs) })
	}},
	{names: []string{"storage"}, team: true, run: func(g *getRun) error {
		ss, err := storageOf(g.ctx, g.c, g.opts.Team)
		return showList(g, ss, err, func() error { return printStorage(g.e, ss) })
	}},
	{names: []string{"budgets", "budget"}, run: func(g *getRun) error {
		bs, err := g.c.Budgets(g.ctx)
		return show(g, bs, err, func() error { return printBudgets(g.e, bs) })
	}},
}

// getKinds lists what get knows, for usage errors.
const getKinds = "workloads, workload ID, nodes, teams, priorityclasses, users, user NAME, members TEAM, prices, budgets, secrets --team TEAM, volumes, storage, clusters, pools, servers or evidence --node NODE"

func getResourceNamed(kind string) (getResource, bool) {
	for _, r := range getResources {
		if slices.Contains(r.names, kind) {
			return r, true
		}
	}
	return getResource{}, false
}

// check refuses the flags and arguments that do not apply to r.
func (r getResource) check(g *getRun, args []string) error {
	kind, workloads := r.names[0], r.names[0] == "workloads"
	if !workloads && (g.opts.Phase != "" || g.opts.Limit != 0 || (g.opts.Team != "" && !r.team)) {
		return usagef("--team, --phase and --limit apply to workloads only (and --team to secrets, volumes and storage)")
	}
	switch {
	case kind == "evidence" && g.node == "":
		return usagef("get evidence --node NODE: which node?")
	case kind != "evidence" && g.node != "":
		return usagef("--node applies to evidence only")
	case g.opts.Limit < 0:
		return usagef("--limit %d: must not be negative", g.opts.Limit)
	case r.name == needsName && len(args) != 2:
		return usagef("get %s %s: which %s?", kind, r.what, strings.ToLower(r.what))
	case r.name == noName && len(args) == 2:
		return usagef("get %s takes no name", args[0])
	}
	return nil
}

// show prints v as asked: JSON or YAML as the API returned it, else print.
func show[T any](g *getRun, v T, err error, print func() error) error {
	if err != nil {
		return err
	}
	if ok, err := g.out.structured(g.e.stdout, v); ok {
		return err
	}
	return print()
}

// showList is show for a list, {"items": [...]} in JSON and YAML.
func showList[T any](g *getRun, vs []T, err error, print func() error) error {
	return show(g, list(vs), err, print)
}

// getWorkloads lists workloads (--team, --phase, --limit, --expand,
// --watch) or shows one by ID or name.
func getWorkloads(g *getRun) error {
	e, c, ctx, opts, out := g.e, g.c, g.ctx, g.opts, g.out
	if len(g.args) == 2 {
		w, err := resolveWorkload(ctx, c, e.now(), g.args[1], opts.Team)
		return show(g, w, err, func() error { return printWorkloads(e, out.value, []api.Workload{*w}) })
	}
	var err error
	if opts.Phase, err = parsePhases(opts.Phase); err != nil {
		return err
	}
	if g.watch {
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
	return showList(g, ws, nil, func() error {
		if !g.expand {
			ws = foldArrays(ws)
		}
		return printWorkloads(e, out.value, ws)
	})
}

// getUsers lists users, or shows one by name.
func getUsers(g *getRun) error {
	if len(g.args) == 2 {
		u, err := g.c.User(g.ctx, g.args[1])
		return show(g, u, err, func() error { return printUsers(g.e, g.out.value, []api.User{*u}) })
	}
	us, err := g.c.Users(g.ctx)
	return showList(g, us, err, func() error { return printUsers(g.e, g.out.value, us) })
}

// printPriorityClasses prints the priority classes as a table.
func printPriorityClasses(e *env, pcs []api.PriorityClass) error {
	t := newTable(e.stdout, "NAME", "VALUE", "PREEMPTIBLE", "MAY-BORROW", "IDLE-ONLY")
	for _, pc := range pcs {
		t.row(pc.Name, strconv.Itoa(pc.Value), strconv.FormatBool(pc.Preemptible), strconv.FormatBool(pc.MayBorrow), strconv.FormatBool(pc.IdleOnly))
	}
	return t.flush()
}

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
			limit = quantity.Milli(*l).String()
		}
		weight := tm.Weight
		if weight == 0 {
			weight = 1 // the default, which the server may leave out
		}
		row := []string{tm.Name, quantity.Milli(tm.GuaranteedMilliGPU).String(), limit, strconv.FormatInt(weight, 10),
			quantity.Milli(tm.UsageMilliGPU).String(), quantity.Milli(tm.FairShareMilliGPU).String(), quantity.Milli(tm.PendingMilliGPU).String()}
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
		row := []string{n.Name, n.State, gpuModels(n.GPUs), healthSummary(n.GPUs), fmt.Sprintf("%s/%d", quantity.Milli(milli), len(n.GPUs)), strconv.FormatBool(n.Schedulable)}
		if !wide {
			t.row(row...)
			continue
		}
		util, used := nodeUse(n.GPUs)
		t.row(append(row, formatMiB(memAlloc)+"/"+formatMiB(memTotal), util, used, n.Pool, "", "")...)
		for _, g := range n.GPUs {
			var holders []string
			for _, a := range g.Allocations {
				holders = append(holders, a.WorkloadID+"@"+quantity.Milli(a.MilliGPU).String())
			}
			t.row(fmt.Sprintf("  %s/%d", n.Name, g.Index), " ", g.Model, gpuHealth(g), fmt.Sprintf("%s/1", quantity.Milli(g.AllocatedMilliGPU)),
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
