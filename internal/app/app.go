package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/acceptrun"
	"github.com/gpufleet/gpufleet/internal/apiserver"
	"github.com/gpufleet/gpufleet/internal/config"
	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/kubernetes"
	"github.com/gpufleet/gpufleet/internal/executor/local"
	"github.com/gpufleet/gpufleet/internal/gpu"
	"github.com/gpufleet/gpufleet/internal/lead"
	"github.com/gpufleet/gpufleet/internal/ledger"
	"github.com/gpufleet/gpufleet/internal/portal"
	"github.com/gpufleet/gpufleet/internal/qualify"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/secrets"
	"github.com/gpufleet/gpufleet/internal/store"
)

// DefaultTeam always exists; callers who name no team land there when they
// may.
const DefaultTeam core.TeamName = "default"

// DemoTeams are created by --demo.
var DemoTeams = []core.TeamName{"research", "inference"}

// Run starts the server described by cfg and blocks until ctx is done or the
// server fails. It prints the API address and the admin token's path to out.
// Logs go to stderr-like logger output.
func Run(ctx context.Context, cfg config.Config, out io.Writer) error {
	return RunWithLogger(ctx, cfg, out, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
}

// RunWithLogger is Run with a chosen logger.
func RunWithLogger(ctx context.Context, cfg config.Config, out io.Writer, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := secureDataDir(cfg.DataDir, log); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	// One server per data dir: a second one would adopt the first one's
	// processes and fight over the node.
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	// Take the port before touching anything, so that a server that
	// cannot serve changes nothing.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer ln.Close()
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	tokenPath, err := ensureAdmin(ctx, st, cfg.DataDir)
	if err != nil {
		return err
	}
	teams, err := ensureTeams(ctx, st, cfg)
	if err != nil {
		return err
	}
	// With PostgreSQL, several servers may share the store: one of them,
	// elected (internal/lead), runs the control loop and what writes with
	// it; its writes and pods carry the lease's fencing token. A SQLite
	// store has one server (the data dir's lock), which leads from the
	// start, unfenced.
	server := store.Server{Name: cmp.Or(cfg.ServerName, serverName(ln.Addr())), Addr: cmp.Or(cfg.AdvertiseAddr, ln.Addr().String()), PID: os.Getpid(), StartedAt: time.Now().UTC()}
	cfg.ServerName = server.Name
	var elect *lead.Elector
	var fence store.Fence
	if st.Postgres() {
		elect = lead.New(lead.Options{Store: st, Name: server.Name, Addr: server.Addr, PID: server.PID, TTL: cfg.LeaseTTL, Logger: log.With("component", "lead")})
		fence = elect
	}
	xs, err := startExecutors(ctx, cfg, st, log, fence)
	if err != nil {
		return err
	}
	defer xs.close()
	p, err := newPlatform(ctx, cfg, st, xs, log)
	if err != nil {
		return err
	}
	if elect == nil {
		p.obs.metrics.Leader(true, 0)
	}
	// The term of a server that leads from the start begins before it
	// serves (its nodes written again, its work re-adopted).
	var runTerm func() error
	if elect == nil {
		if runTerm, err = p.leaderTerm(ctx); err != nil {
			return err
		}
	}
	if err := p.openAcceptance(ctx, server.Name); err != nil {
		return err
	}
	defer p.runs.Close()
	hs := newHTTPServer(p.api(server.Name), serverTimeouts)
	// Workloads in network namespaces of their own reach the API on their
	// bridge's gateway only.
	gwLn, err := serveAPIToWorkloads(xs.local, ln, log)
	if err != nil {
		return err
	}
	if gwLn != nil {
		go hs.Serve(gwLn) // closed by hs.Shutdown
	}
	if xs.local != nil {
		defer xs.local.Close()
	}
	fmt.Fprintf(out, "gpufleet: API on http://%s\n", ln.Addr())
	fmt.Fprintf(out, "gpufleet: portal on http://%s/ (sign in with a token)\n", ln.Addr())
	fmt.Fprintf(out, "gpufleet: admin token in %s\n", tokenPath)
	fmt.Fprintf(out, "gpufleet: %s; teams: %v\n", xs.where, teams)
	fmt.Fprintf(out, "gpufleet: try  export GPUFLEET_ADDR=%s GPUFLEET_TOKEN=$(cat %s); gpufleet submit --gpus 0.5 -- %s\n", ln.Addr(), tokenPath, xs.try)
	keepHeapFloor()
	if a := os.Getenv("GPUFLEET_PPROF_ADDR"); a != "" {
		if err := loopbackOnly(a); err != nil {
			return fmt.Errorf("GPUFLEET_PPROF_ADDR: %w", err)
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go servePprof(ctx, a, log)
	}
	return p.serve(ctx, hs, ln, server, elect, runTerm)
}

// platform holds the server's parts: what the leader runs beside its
// control loop and what the API serves.
type platform struct {
	cfg       config.Config
	st        *store.Store
	xs        *executors
	obs       *observability
	lifecycle *qualify.Qualifier
	vr        *control.VolumeReconciler
	ex        executor.Executor
	log       *slog.Logger
	runs      *acceptrun.Runner
	classes   []core.PriorityClass
	policy    sched.Options
	sealer    *secrets.Store
	led       *ledger.Ledger
}

// openStore opens the configured store (the data dir's SQLite file by
// default).
func openStore(ctx context.Context, cfg config.Config) (*store.Store, error) {
	target := cmp.Or(cfg.Store, filepath.Join(cfg.DataDir, "gpufleet.db"))
	return store.OpenWith(ctx, target, store.Options{
		// One server owns a SQLite store and writes every node through
		// it: the decoded nodes can be kept between writes, which a cycle,
		// a qualification step and a scrape would otherwise decode again
		// each. Several servers share a PostgreSQL store, whose nodes
		// another may change.
		Cache:             !store.IsPostgres(target),
		MaxPendingPerTeam: cfg.Limits.MaxPendingPerTeam,
		MaxPendingPerUser: cfg.Limits.MaxPendingPerUser,
	})
}

// ensureTeams makes the operator's own teams (the default team, the
// demo's) when they do not exist, and returns their names. They may use
// every class, production included; teams created later start with the
// preemptible classes only, until an admin or their team-admin grants
// more. An existing team is left as it is.
func ensureTeams(ctx context.Context, st *store.Store, cfg config.Config) ([]core.TeamName, error) {
	teams := []core.TeamName{DefaultTeam}
	if cfg.Demo {
		teams = append(teams, DemoTeams...)
	}
	var allClasses []string
	for _, c := range cfg.PriorityClasses {
		allClasses = append(allClasses, c.Name)
	}
	for _, name := range teams {
		t := core.NewTeam(name, time.Now().UTC())
		t.PriorityClasses = allClasses
		if err := st.CreateTeam(ctx, t); err != nil && !errors.Is(err, core.ErrConflict) {
			return nil, err
		}
	}
	return teams, nil
}

// newPlatform makes the server's parts that its executors do not hold:
// the node lifecycle, the team secrets, the ledger (its budgets evaluated
// once before the first cycle, later in the background), observability
// and the volume reconciler.
func newPlatform(ctx context.Context, cfg config.Config, st *store.Store, xs *executors, log *slog.Logger) (*platform, error) {
	p := &platform{cfg: cfg, st: st, xs: xs, ex: xs.ex, log: log}
	p.classes = make([]core.PriorityClass, len(cfg.PriorityClasses))
	for i, c := range cfg.PriorityClasses {
		p.classes[i] = core.PriorityClass{Name: c.Name, Value: c.Value, Preemptible: c.Preemptible, MayBorrow: c.MayBorrow, IdleOnly: c.IdleOnly}
	}
	p.policy = sched.Options{StarvationAfter: cfg.Scheduler.StarvationAfter.Duration, FairShareReclaim: cfg.Scheduler.FairShareReclaim,
		MinRuntime: cfg.Scheduler.MinRuntime.Duration, Burst: burstPolicy(cfg)}
	p.lifecycle = qualify.New(qualify.Options{Store: st, Logger: log.With("component", "lifecycle"), Local: core.NodeName(cfg.NodeName),
		Level: cfg.Qualification.Level, Every: cfg.Qualification.Every.Duration, RequireDCGM: cfg.Qualification.RequireDCGM,
		Drain: cfg.Qualification.Policy == "drain", Tick: min(time.Second, cfg.ResyncPeriod), Sandbox: probeSandbox(xs.local), CUDAProbe: cfg.Qualification.CUDAProbe})
	keys, err := secrets.LoadOrCreate(cmp.Or(cfg.SecretsKeyFile, filepath.Join(cfg.DataDir, "secrets.key")))
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	p.sealer = &secrets.Store{Store: st, Keys: keys}
	p.led = &ledger.Ledger{Store: st, Currency: cfg.Cost.Currency, FilePrices: append(slices.Clone(cfg.Cost.Prices), cfg.PoolPrices()...), DefaultPool: cfg.Pool, Since: storeBirth(ctx, st)}
	if _, err := p.led.Budgets(ctx, time.Now().UTC(), 0); err != nil {
		return nil, fmt.Errorf("evaluate the budgets: %w", err)
	}
	p.obs = newObservability(cfg, st, xs.sampled(), p.led, p.lifecycle, log)
	if vols, ok := xs.ex.(executor.Volumes); ok && (xs.multi == nil || xs.multi.KeepsVolumes()) {
		p.vr = &control.VolumeReconciler{Store: st, Volumes: vols, Every: volumeEvery(cfg), Logger: log.With("component", "volumes")}
	}
	p.runs = &acceptrun.Runner{} // opened by openAcceptance, before any term runs
	return p, nil
}

// leaderTerm is the leader's work for one term: the nodes written again,
// running work re-adopted, orphan pods deleted; the returned run is the
// control loop and what writes beside it, until ctx (the term) ends.
func (p *platform) leaderTerm(ctx context.Context) (run func() error, err error) {
	for _, resync := range p.xs.resync {
		resync(ctx)
	}
	loop := control.New(control.Options{Store: p.st, Executor: p.ex, Logger: p.log.With("component", "control"), Resync: p.cfg.ResyncPeriod,
		Classes: p.classes, Policy: &p.policy, Reporter: p.obs.metrics, OnCycle: p.obs.onCycle, StartParallelism: p.xs.startParallelism(), Budgets: p.led, Secrets: p.sealer,
		Datasets: p.cfg.Storage.Datasets, Volumes: p.vr})
	if err := loop.Reconcile(ctx); err != nil {
		return nil, err
	}
	for _, kex := range p.xs.kubes {
		// Every running workload is adopted now: a pod nobody adopted
		// would run twice. Each deletion is recorded in the audit trail,
		// where an operator looks for who deleted what (see the kubernetes
		// package's doc).
		orphans, err := kex.DeleteOrphans(ctx)
		for _, o := range orphans {
			p.log.Warn("deleted an orphan pod", "namespace", o.Namespace, "pod", o.Name, "workload", o.Workload, "attempt", o.Attempt, "err", o.Err)
			if aerr := p.st.AppendAudit(ctx, orphanAudit(o, "a restart")); aerr != nil {
				p.log.Error("audit an orphan pod", "pod", o.Name, "err", aerr)
			}
		}
		if err != nil {
			p.log.Error("delete orphan pods", "err", err)
		}
	}
	return func() error { return runLeader(ctx, loop, p) }, nil
}

// openAcceptance opens the acceptance runs of this server. Cards submit
// their stages' workloads through the API's own checks (Submit, set by
// api).
func (p *platform) openAcceptance(ctx context.Context, server string) error {
	r := p.runs
	r.Store, r.Usage, r.Logger, r.Server = p.st, p.obs.tracker, p.log.With("component", "acceptance"), server
	r.Drain = func(ctx context.Context, node core.NodeName, reason string) error {
		_, err := p.lifecycle.Drain(ctx, node, 0, "acceptance: "+reason)
		return err
	}
	if p.xs.local != nil && p.xs.multi == nil {
		r.ReadVolume = p.xs.local.ReadVolumeFile
	}
	if enf, ok := p.ex.(executor.EgressEnforcer); ok {
		r.EnforcesEgress = enf.EnforcesEgress()
	}
	r.Alive = func(ctx context.Context) (map[string]bool, error) { return aliveServers(ctx, p.st, p.cfg.LeaseTTL) }
	if err := r.Open(ctx); err != nil {
		return fmt.Errorf("acceptance runs: %w", err)
	}
	return nil
}

// api is the HTTP handler of the server: the portal owns "/" and "/ui/",
// every other path is the API's.
func (p *platform) api(server string) http.Handler {
	cfg := p.cfg
	hosts, _ := cfg.Proxy.URL() // checked by Validate
	srv := apiserver.New(apiserver.Options{
		Store:           p.st,
		ServerName:      server,
		Logs:            p.ex,
		Logger:          p.log.With("component", "api"),
		MaxBodyBytes:    cfg.MaxBodyBytes,
		DefaultTeam:     DefaultTeam,
		PriorityClasses: p.classes,
		OpenAPI:         api.OpenAPI,
		RateLimit:       apiserver.RateLimit{RequestsPerSecond: cfg.Limits.RequestsPerSecond, Burst: cfg.Limits.Burst},
		Usage:           p.obs.tracker,
		Metrics:         p.obs.metrics.Handler(),
		CommandsOnly:    p.xs.commandsOnly(),
		Ledger:          p.led,
		Lifecycle:       p.lifecycle,
		Endpoints:       endpoints(cfg, p.ex),
		Secrets:         p.sealer,
		WorkloadHosts:   hosts,
		Fleet:           fleetOf(cfg, p.xs),
		Acceptance:      p.runs,
		Storage:         apiserver.Storage{Limit: func(t core.TeamName) int64 { return cfg.Storage.Limit(string(t)) }, Datasets: datasetNames(cfg.Storage.Datasets)},
	})
	p.runs.Submit = srv
	if endpoints(cfg, p.ex) != nil {
		p.runs.Dial = srv
	}
	return srv.Front(portal.With(srv))
}

// serve runs the HTTP server and the leader's work (runTerm from the start
// without an elector, each won term's with one) until ctx ends or either
// fails. Running workloads keep running: the next start re-adopts them.
func (p *platform) serve(ctx context.Context, hs *http.Server, ln net.Listener, server store.Server, elect *lead.Elector, runTerm func() error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	wg.Add(2)
	if elect == nil {
		go func() {
			defer wg.Done()
			errc <- runTerm()
		}()
		wg.Go(func() { lead.Heartbeat(ctx, p.st, server, 10*time.Second, p.log) })
	} else {
		elect.SetOnChange(p.obs.metrics.Leader)
		go func() {
			defer wg.Done()
			elect.Run(ctx, func(ctx context.Context) {
				run, err := p.leaderTerm(ctx)
				if err == nil {
					err = run()
				}
				if err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrFenced) {
					p.log.Error("the leader's work failed", "err", err)
					select {
					case errc <- err:
					default:
					}
				}
			})
			errc <- nil
		}()
	}
	go func() {
		defer wg.Done()
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
			return
		}
		errc <- nil
	}()
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	hs.Shutdown(sctx)
	wg.Wait()
	return runErr
}

// httpTimeouts bound each connection of the HTTP server.
type httpTimeouts struct {
	// readHeader bounds the request line and headers; read the whole
	// request, body included, from its first byte: a client that trickles
	// a body (a byte every 2 s) is cut off when it passes, however steady.
	readHeader, read time.Duration
	// write bounds an answer from the end of its request; a followed log
	// renews it at each write instead (apiserver's streamWriter), so that
	// it lasts as long as its workload.
	write time.Duration
	// idle bounds a kept-alive connection between requests.
	idle time.Duration
}

// serverTimeouts are the HTTP server's. A request body is at most
// cfg.MaxBodyBytes (1 MiB), read in well under 30 s; tests shorten them.
var serverTimeouts = httpTimeouts{readHeader: 10 * time.Second, read: 30 * time.Second, write: time.Minute, idle: 2 * time.Minute}

func newHTTPServer(h http.Handler, t httpTimeouts) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.readHeader, ReadTimeout: t.read, WriteTimeout: t.write,
		IdleTimeout: t.idle, MaxHeaderBytes: 64 << 10}
}

// secureDataDir makes the data dir (the store, which holds every token's
// hash, and the admin token) readable by this user only: the dir 0700 and
// the admin token and lock 0600, whatever the umask, and fixed at start when
// an earlier version or an operator left them looser. The store makes its
// own files 0600 (store.OpenWith).
func secureDataDir(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o700}, {filepath.Join(dir, "admin-token"), 0o600}, {filepath.Join(dir, "lock"), 0o600}} {
		fi, err := os.Stat(f.path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode().Perm() == f.mode {
			continue
		}
		if err := os.Chmod(f.path, f.mode); err != nil {
			return err
		}
		log.Warn("tightened the mode of a data dir file", "path", f.path, "was", fi.Mode().Perm().String(), "now", f.mode.String())
	}
	return nil
}

// SystemUser is the audit trail's name for what the server does by itself.
const SystemUser = "gpufleet"

// orphanAudit is the audit entry of an orphan pod deleted at start-up.
func orphanAudit(o kubernetes.Orphan, after string) core.AuditEntry {
	e := core.AuditEntry{
		Time:    time.Now().UTC(),
		User:    SystemUser,
		Action:  "delete orphan pod",
		Method:  http.MethodDelete,
		Path:    "/api/v1/namespaces/" + o.Namespace + "/pods/" + o.Name, // the Kubernetes API's
		Object:  o.Namespace + "/" + o.Name,
		Team:    o.Team,
		Status:  http.StatusOK,
		Message: fmt.Sprintf("pod of workload %s attempt %d, which no running workload adopted after %s", o.Workload, o.Attempt, after),
	}
	if o.Err != nil {
		e.Status = http.StatusInternalServerError
		e.Message += ": " + o.Err.Error()
	}
	return e
}

// ensureAdmin creates the admin user on first start, or a fresh admin token
// when the token file is gone, and writes the token to DIR/admin-token
// (0600). The store keeps only its hash.
func ensureAdmin(ctx context.Context, st *store.Store, dir string) (string, error) {
	path := filepath.Join(dir, "admin-token")
	_, userErr := st.User(ctx, "admin")
	if userErr != nil && !errors.Is(userErr, core.ErrNotFound) {
		return "", userErr
	}
	if userErr == nil {
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
	}
	tok := apiserver.NewToken()
	if err := writeSecret(path, tok+"\n"); err != nil {
		return "", err
	}
	now := time.Now().UTC()
	if userErr != nil {
		err := st.CreateUser(ctx, core.User{Name: "admin", Admin: true, CreatedAt: now}, core.Token{Name: "admin-token file", CreatedAt: now}, apiserver.HashToken(tok))
		if err == nil {
			return path, nil
		}
		if !errors.Is(err, core.ErrConflict) {
			return "", err
		}
		// Another server sharing the store made the admin meanwhile:
		// this one's file gets a token of its own.
	}
	if err := st.CreateToken(ctx, core.Token{User: "admin", Name: "admin-token file", CreatedAt: now}, apiserver.HashToken(tok)); err != nil {
		return "", err
	}
	return path, nil
}

func writeSecret(path, s string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	// 0600 whatever the umask, and a stale tmp of another mode too.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// startLocal registers this machine as the one node and returns the local
// executor.
func startLocal(ctx context.Context, cfg config.Config, st *store.Store, log *slog.Logger, place func(*core.Node)) (*local.Executor, core.Node, error) {
	node, err := localNode(ctx, cfg, log)
	if err != nil {
		return nil, node, err
	}
	if place != nil {
		place(&node)
	}
	if len(node.GPUs) == 0 {
		// No real GPUs and none asked for: keep the simulated ones this
		// node had, so that a demo store restarted without --demo still works.
		if nodes, err := st.Nodes(ctx); err == nil {
			for _, old := range nodes {
				if old.Name == node.Name && len(old.GPUs) > 0 && old.GPUs[0].Simulated {
					node.GPUs = old.GPUs
					log.Info("keeping the simulated GPUs registered before", "gpus", len(old.GPUs))
				}
			}
		}
	}
	simulated := len(node.GPUs) > 0 && node.GPUs[0].Simulated
	first, last, err := cfg.Local.UIDs()
	if err != nil {
		return nil, node, err
	}
	ex, err := local.New(local.Options{
		DataDir:        cfg.DataDir,
		Logger:         log.With("component", "executor"),
		SimulatedUsage: simulated,
		Isolation: local.Isolation{
			Disabled:      cfg.Local.Isolation == "off",
			UIDFirst:      first,
			UIDLast:       last,
			ReadOnlyPaths: cfg.Local.ReadOnlyPaths,
		},
		ContainerRuntime: cfg.Local.ContainerRuntime,
		ContainerArgs:    cfg.Local.ContainerArgs,
		PortHosts:        cfg.Proxy.BaseURL != "",
		Path:             cfg.Local.Path,
		Network:          localNetwork(cfg.Local.Network),
	})
	if err != nil {
		return nil, node, err
	}
	iso := ex.Isolation()
	node.Isolation = iso.String()
	if f := ex.Forwarding(); f != "" {
		log.Info("workloads have network namespaces of their own", "range", iso.Network, "forwarding", f)
	}
	if err := checkIsolation(ctx, cfg, st, iso, log); err != nil {
		return nil, node, err
	}
	// The node takes work once it has passed qualification (Registering →
	// Validating → Ready, by internal/qualify), unless the configuration
	// says otherwise; a node registered before keeps its state.
	initial := core.NodeStatus{State: core.NodeRegistering, Since: time.Now().UTC(), Message: "qualification runs before it takes work"}
	if !cfg.Qualification.OnRegistration {
		initial = core.NodeStatus{State: core.NodeReady, Since: time.Now().UTC(), Message: "qualification at registration is off (qualification.onRegistration)"}
	}
	if err := st.RegisterNode(ctx, node, initial); err != nil {
		return nil, node, err
	}
	return ex, node, nil
}

// checkIsolation refuses to run several teams' workloads on this machine
// when the executor cannot keep them apart (not root, or no Landlock),
// unless the operator allowed it (--allow-shared-uid) or asked for the
// single-user demo; either way it says so.
func checkIsolation(ctx context.Context, cfg config.Config, st *store.Store, iso local.IsolationStatus, log *slog.Logger) error {
	if iso.Full() {
		log.Info("workloads are isolated", "isolation", iso.String())
		return nil
	}
	teams, err := st.Teams(ctx)
	if err != nil {
		return err
	}
	if len(teams) <= 1 || cfg.Local.AllowSharedUID || cfg.Demo {
		log.Warn("workloads are NOT isolated from the platform's files or from each other: run the server as root on Linux 5.13+ with Landlock for per-team isolation (see SECURITY.md)",
			"isolation", iso.String(), "teams", len(teams))
		return nil
	}
	return fmt.Errorf("this server has %d teams but cannot isolate their workloads from each other or from the platform's files: %s; "+
		"run it as root on a kernel with Landlock, or pass --allow-shared-uid on a single-user machine (see SECURITY.md)", len(teams), iso)
}

// startKubernetes connects to the cluster and returns the kubernetes
// executor. The cluster's GPU nodes become the store's nodes, and stay in
// step with it: a node added is put, a node changed is updated, a node
// removed is kept (its allocations still name it) but unschedulable.
//
// A named cluster is one of several (config clusters:): its API server
// not answering does not fail the server's start. Its executor starts
// unreachable then (kubernetes.Options.StartUnreachable): the cluster's
// nodes the store knew from before are written NotReady, so that the
// node lifecycle makes them Lost and requeues their work past its grace;
// its running workloads are adopted as expected (their pods are never
// orphans); and the executor finishes its start by itself when the API
// server answers, with no restart (its nodes reported as the cluster
// lists them, the expected pods adopted, the others deleted as orphans
// and audited). The server's only cluster (cluster "") that does not
// answer fails the start, naming its API server: the server would have
// nowhere to run work.
func startKubernetes(ctx context.Context, cfg config.Config, st *store.Store, log *slog.Logger, cluster string, place func(*core.Node), fence store.Fence) (*kubernetes.Executor, *nodeSync, error) {
	client, err := kubernetes.NewClientset(clientOptions(cfg))
	if err != nil {
		return nil, nil, err
	}
	dyn, err := kubernetes.NewDynamic(clientOptions(cfg))
	if err != nil {
		return nil, nil, err
	}
	several := cluster != ""
	ns := &nodeSync{st: st, log: log.With("component", "nodes"), place: place, fence: fence, cluster: cluster}
	var fenceToken func() int64
	if fence != nil {
		fenceToken = fence.Token
	}
	// The cluster's nodes from before: the executor of a cluster of
	// several reports them NotReady until it answers (an error then
	// fails the start); the server's only cluster writes its nodes as it
	// lists them, so without them it only writes more.
	if err := ns.load(ctx); err != nil && several {
		return nil, nil, fmt.Errorf("the cluster's nodes from before: %w", err)
	}
	var knownNodes []core.Node
	if several {
		knownNodes = ns.records()
	}
	kex, err := kubernetes.New(ctx, kubernetes.Options{
		Client:            client,
		NamespaceTemplate: cfg.Kubernetes.NamespaceTemplate,
		DefaultImage:      cfg.Kubernetes.DefaultImage,
		Fractions:         kubernetes.FractionMode(cfg.Kubernetes.Fractions),
		PoolLabel:         cfg.Kubernetes.PoolLabel,
		RegionLabel:       cfg.Kubernetes.RegionLabel,
		NodeSelector:      cfg.Kubernetes.NodeSelector,
		StorageClass:      cfg.Kubernetes.StorageClass,
		VolumeAccessMode:  cfg.Kubernetes.VolumeAccessMode,
		CheckpointBytes:   cfg.Kubernetes.CheckpointBytes(),
		PortHosts:         cfg.Proxy.BaseURL != "",
		PriorityClasses:   podClasses(cfg),
		StartUnreachable:  several,
		KnownNodes:        knownNodes,
		OnNodes:           func(nodes []core.Node) { ns.put(ctx, nodes) },
		// The pods its cluster kept while it could not be reached (at
		// the server's start too, for a cluster of several), of attempts
		// no longer expected, deleted on its return: audited as the
		// start's are.
		OnOrphans: func(orphans []kubernetes.Orphan) {
			for _, o := range orphans {
				log.Warn("deleted an orphan pod after the cluster's return", "namespace", o.Namespace, "pod", o.Name, "workload", o.Workload, "attempt", o.Attempt, "err", o.Err)
				if err := st.AppendAudit(context.WithoutCancel(ctx), orphanAudit(o, "its cluster was unreachable")); err != nil {
					log.Error("audit an orphan pod", "pod", o.Name, "err", err)
				}
			}
		},
		Fence: fenceToken,
		Native: kubernetes.NativeOptions{SchedulerName: cfg.Kubernetes.Native.Scheduler(), TeamLabels: cfg.Kubernetes.Native.TeamLabels,
			TeamAliases: cfg.Kubernetes.Native.TeamAliases, NamespaceTeamLabel: cfg.Kubernetes.Native.TeamLabel(), Cluster: cluster},
		Dynamic: dyn,
		Logger:  log.With("component", "executor"),
	})
	if err != nil {
		return nil, nil, err
	}
	ns.put(ctx, kex.Nodes())
	return kex, ns, nil
}

// podClasses are the priority classes whose Kubernetes PriorityClasses
// (gpufleet-<class>) the kubernetes executor makes sure exist.
func podClasses(cfg config.Config) []core.PriorityClass {
	out := make([]core.PriorityClass, len(cfg.PriorityClasses))
	for i, c := range cfg.PriorityClasses {
		out[i] = core.PriorityClass{Name: c.Name, Value: c.Value}
	}
	return out
}

// nodeSync writes the cluster's GPU nodes to the store.
//
// A node is written only when it changed: its record (what PutNode
// keeps: the node as its cluster reports it, placed) differs from the
// one known to be in the store apart from updatedAt, which thus says
// when the node came or last changed. The Releaser reads a burst node's
// idle time from it (burst.Releaser), so a restart, which compares
// the nodes its cluster lists with the records the store holds (load),
// leaves an unchanged node's updatedAt as it was.
type nodeSync struct {
	st  *store.Store
	log *slog.Logger
	// place, when set, puts each node in its cluster and pool (several
	// clusters: config pools).
	place func(*core.Node)
	// cluster names the cluster of several whose nodes these are; empty
	// for the server's only one (every stored node is its).
	cluster string
	// fence, when set (several servers), makes the writes the leader's
	// only: a follower's are refused, quietly, and the leader writes
	// every node that differs from the store again at the start of its
	// term (resync).
	fence store.Fence
	mu    sync.Mutex
	// known is each node's record as it is in the store: as read by
	// load, or as last written.
	known map[core.NodeName]core.Node
	// unsure are the nodes whose record load could not tell whole: the
	// store gives a node merged with its status, and a status whose
	// state takes no work hides the record's Schedulable. They are
	// written at their next report.
	unsure map[core.NodeName]bool
}

// load reads the cluster's node records from the store into known: a
// node the store gives merged with its status (core.Node.Apply) is
// unmerged (no state, no drain grace, no device health, which PutNode
// never writes), and marked unsure when its state takes no work. On an
// error known is empty, so that every node is written.
func (s *nodeSync) load(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.known, s.unsure = map[core.NodeName]core.Node{}, map[core.NodeName]bool{}
	stored, err := s.st.Nodes(ctx)
	if err != nil {
		return err
	}
	for _, n := range stored {
		// Of several clusters, this one's nodes only: another's are
		// not gone because this one does not list them.
		if s.cluster != "" && n.Cluster != s.cluster {
			continue
		}
		if !n.State.Takes() {
			s.unsure[n.Name] = true
		}
		n.State, n.DrainGrace = "", 0
		n.GPUs = slices.Clone(n.GPUs)
		for i := range n.GPUs {
			n.GPUs[i].Health = ""
		}
		s.known[n.Name] = n
	}
	return nil
}

// records are the known records, by name.
func (s *nodeSync) records() []core.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]core.Node, 0, len(s.known))
	for _, n := range s.known {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b core.Node) int { return strings.Compare(string(a.Name), string(b.Name)) })
	return out
}

// resync writes the nodes that differ from the store's records, read
// again: the leader's first act in a term, after a time as a follower
// whose writes were refused while another leader wrote.
func (s *nodeSync) resync(ctx context.Context, nodes []core.Node) {
	if err := s.load(ctx); err != nil {
		s.log.Warn("read the nodes before writing them again: every node is written", "err", err)
	}
	s.put(ctx, nodes)
}

func (s *nodeSync) put(ctx context.Context, nodes []core.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known == nil {
		s.known = map[core.NodeName]core.Node{}
	}
	seen := map[core.NodeName]bool{}
	for _, n := range nodes {
		if s.place != nil {
			s.place(&n)
		}
		seen[n.Name] = true
		if old, ok := s.known[n.Name]; ok && !s.unsure[n.Name] && sameNode(old, n) {
			continue
		}
		if err := s.st.PutNode(s.fenced(ctx), n); err != nil {
			s.logErr(n.Name, err)
			continue
		}
		s.known[n.Name] = n
		delete(s.unsure, n.Name)
	}
	for name, old := range s.known {
		if seen[name] || !old.Schedulable {
			continue
		}
		old.Schedulable = false
		old.UpdatedAt = time.Now().UTC()
		if err := s.st.PutNode(s.fenced(ctx), old); err != nil {
			s.logErr(name, err)
			continue
		}
		s.known[name] = old
		delete(s.unsure, name)
		s.log.Warn("node left the cluster; no new work goes there", "node", name)
	}
}

func (s *nodeSync) fenced(ctx context.Context) context.Context {
	if s.fence == nil {
		return ctx
	}
	return store.WithFence(ctx, s.fence)
}

func (s *nodeSync) logErr(node core.NodeName, err error) {
	if errors.Is(err, store.ErrFenced) {
		s.log.Debug("node not written: this server follows", "node", node)
		return
	}
	s.log.Error("put node", "node", node, "err", err)
}

// sameNode compares two nodes but for their update time. It runs for
// every node at each node event of the cluster (a heartbeat of one of
// hundreds of nodes), so it compares values rather than encodings.
func sameNode(a, b core.Node) bool {
	a.UpdatedAt, b.UpdatedAt = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

// localNode describes this machine: its real GPUs, or simulated ones when
// asked (--fake-gpus) or when --demo finds none.
func localNode(ctx context.Context, cfg config.Config, log *slog.Logger) (core.Node, error) {
	n := core.Node{
		Name:        core.NodeName(cfg.NodeName),
		Pool:        cfg.Pool,
		Schedulable: true,
		MilliCPU:    int64(runtime.NumCPU()) * 1000,
		MemoryMiB:   hostMemoryMiB(),
		UpdatedAt:   time.Now().UTC(),
	}
	spec := cfg.FakeGPUs
	if spec == "" {
		gpus, err := gpu.Discover(ctx)
		switch {
		case err == nil:
			n.GPUs = gpus
			return n, nil
		case cfg.Demo:
			log.Info("no GPUs found; simulating some for the demo", "spec", config.DemoFakeGPUs, "reason", err)
			spec = config.DemoFakeGPUs
		default:
			log.Warn("no GPUs found; this node takes no GPU work (use --fake-gpus to simulate some)", "reason", err)
			return n, nil
		}
	}
	gpus, err := gpu.Fake(cfg.NodeName, spec)
	if err != nil {
		return n, err
	}
	n.GPUs = gpus
	return n, nil
}

func hostMemoryMiB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var kb int64
	if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err != nil {
		return 0
	}
	return kb / 1024
}

// lockDataDir takes an exclusive lock on DIR/lock for the life of the
// server (released by the kernel if the process dies).
func lockDataDir(dir string) (func(), error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf("data dir %s is in use by another gpufleet server (pid %s)", dir, strings.TrimSpace(string(b)))
	}
	f.Truncate(0)
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return func() { f.Close() }, nil
}

// storeBirth is when the store was made: its first team's creation (the
// default team is made on first start), or now.
func storeBirth(ctx context.Context, st *store.Store) time.Time {
	birth := time.Now().UTC()
	if ts, err := st.Teams(ctx); err == nil {
		for _, t := range ts {
			if !t.CreatedAt.IsZero() && t.CreatedAt.Before(birth) {
				birth = t.CreatedAt
			}
		}
	}
	return birth.Truncate(time.Second)
}

// endpoints is where the executor's workloads serve their ports, for the
// proxy and the readiness probes; nil for an executor that cannot say, and
// for pods when this server cannot reach their IPs (it runs outside the
// cluster: kubernetes.podNetwork).
func endpoints(cfg config.Config, ex executor.Executor) apiserver.EndpointSource {
	if _, ok := ex.(*kubernetes.Executor); ok && !cfg.Kubernetes.ReachesPods() {
		return nil
	}
	if eps, ok := ex.(apiserver.EndpointSource); ok {
		return eps
	}
	return nil
}

// volumeEvery is how often volumes are reconciled and measured: a minute,
// or the resync period when that is longer.
func volumeEvery(cfg config.Config) time.Duration { return max(time.Minute, cfg.ResyncPeriod) }

func datasetNames(ds map[string]string) map[string]bool {
	out := make(map[string]bool, len(ds))
	for n := range ds {
		out[n] = true
	}
	return out
}

// localNetwork is the configuration of the workloads' network namespaces,
// as the local executor takes it.
func localNetwork(n config.LocalNetwork) local.Network {
	out := local.Network{Off: n.Off, CIDR: n.CIDR, Egress: n.Egress, Allow: n.Allow}
	if len(n.Teams) > 0 {
		out.Teams = map[core.TeamName]local.Egress{}
		for team, e := range n.Teams {
			out.Teams[core.TeamName(team)] = local.Egress{Egress: e.Egress, Allow: e.Allow}
		}
	}
	return out
}

// serveAPIToWorkloads listens for the API on the local executor's gateway,
// where workloads in network namespaces of their own reach it, and tells
// the executor where; nil where workloads share the host's network or the
// main listener covers the gateway already (an unspecified address).
func serveAPIToWorkloads(ex *local.Executor, ln net.Listener, log *slog.Logger) (net.Listener, error) {
	if ex == nil {
		return nil, nil
	}
	gw, ok := ex.Gateway()
	if !ok {
		return nil, nil
	}
	main := ln.Addr().(*net.TCPAddr)
	if main.IP.IsUnspecified() {
		return nil, ex.ServeAPIOn(main.Port)
	}
	gwLn, err := net.Listen("tcp", netip.AddrPortFrom(gw, uint16(main.Port)).String())
	if err != nil {
		// The port is another's on that address: any other will do.
		if gwLn, err = net.Listen("tcp", netip.AddrPortFrom(gw, 0).String()); err != nil {
			return nil, fmt.Errorf("serve the API to the workloads on %s: %w", gw, err)
		}
	}
	port := gwLn.Addr().(*net.TCPAddr).Port
	if err := ex.ServeAPIOn(port); err != nil {
		gwLn.Close()
		return nil, err
	}
	log.Info("the API for workloads", "addr", gwLn.Addr().String())
	return gwLn, nil
}
