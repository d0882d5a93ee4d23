package control

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/store"
)

// NativeSource is an executor that sees workloads submitted to its cluster
// directly (kubernetes: pods with schedulerName gpufleet, made with kubectl
// or by a controller) and shows their users why they wait.
type NativeSource interface {
	// NativeSubmissions groups the pods waiting for gpufleet into
	// submissions; taken tells the pods a workload holds already (they
	// count toward their gang, and are not submitted again).
	NativeSubmissions(ctx context.Context, taken func(uid string) bool) []executor.NativeSubmission
	// NativePodLive reports whether a pod of a native workload is still
	// there for gpufleet to place: it exists (that UID), is not being
	// deleted and has not ended.
	NativePodLive(ns string, p core.NativePod) bool
	// NativeWait shows why the pods wait, once per change.
	NativeWait(ctx context.Context, n core.Native, w executor.NativeWait) error
	// NativeChanged is signalled when the pods change.
	NativeChanged() <-chan struct{}
}

// Reasons of the native admission's refusals.
const (
	ReasonUnknownTeam     = "UnknownTeam"
	ReasonClassNotAllowed = "PriorityClassNotAllowed"
	ReasonInfeasible      = "Infeasible"
	ReasonPendingLimit    = "TooManyPending"
	ReasonWorkloadEnded   = "WorkloadEnded"
	// ReasonPodDeleted ends a native workload whose pods were deleted
	// (the kubernetes executor's exit reason too).
	ReasonPodDeleted = "PodDeleted"
)

// NativeAdmission admits native pods as workloads, as a submission through
// the API is admitted: the team must exist and may use the priority class,
// a class that may not borrow fits the team's guarantee, the team's
// residency applies, and some node could hold it. A refusal shows on the
// pods (NativeWait) and stores nothing. It also cancels a pending native
// workload whose pods are gone, and shows the scheduler's explanation of
// each pending one on its pods. The loop places, binds, evicts and ends
// native workloads as it does the others.
type NativeAdmission struct {
	Store  *store.Store
	Source NativeSource
	// Cluster is the cluster whose native workloads these are
	// (core.Native.Cluster); empty for the server's only one.
	Cluster string
	// Classes are the priority classes; core.DefaultPriorityClasses when
	// nil.
	Classes []core.PriorityClass
	// Every is how often it runs besides the pods' changes (the
	// explanations of pending workloads change with the schedule);
	// default one second.
	Every  time.Duration
	Now    func() time.Time
	Logger *slog.Logger

	// shown is the explanation last shown per pending workload, so that
	// each is shown once.
	shown map[core.WorkloadID]string
	// ended maps the idempotency key of pods whose workload has ended to
	// it, so that they are not submitted again (a workload cancelled in
	// gpufleet while its pods wait).
	ended map[string]core.WorkloadID
}

// Run admits until ctx ends: at each change of the pods, and every Every.
func (a *NativeAdmission) Run(ctx context.Context) {
	tick := time.NewTicker(cmp.Or(a.Every, time.Second))
	defer tick.Stop()
	for {
		if err := a.Reconcile(ctx); err != nil && ctx.Err() == nil {
			a.log().Error("native admission", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-a.Source.NativeChanged():
		case <-tick.C:
		}
	}
}

func (a *NativeAdmission) log() *slog.Logger {
	if a.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Logger
}

func (a *NativeAdmission) now() time.Time {
	if a.Now == nil {
		return time.Now()
	}
	return a.Now()
}

// Reconcile runs one pass:
//
//  1. a pending native workload with a pod that is gone (deleted, being
//     deleted, ended) is cancelled;
//  2. each group of waiting pods no workload holds is admitted, or shown
//     why not;
//  3. each pending native workload shows the scheduler's explanation.
func (a *NativeAdmission) Reconcile(ctx context.Context) error {
	if a.shown == nil {
		a.shown, a.ended = map[core.WorkloadID]string{}, map[string]core.WorkloadID{}
	}
	snap, err := a.Store.Snapshot(ctx)
	if err != nil {
		return err
	}
	taken := map[string]bool{}
	var pending []*core.Workload
	for _, w := range slices.Concat(snap.Pending, snap.Running) {
		if w.Native == nil || w.Native.Cluster != a.Cluster {
			continue
		}
		if w.Status.Phase == core.Pending && a.gone(ctx, w) {
			continue
		}
		for _, u := range w.Native.PodUIDs() {
			taken[u] = true
		}
		if w.Status.Phase == core.Pending {
			pending = append(pending, w)
		}
	}
	var errs []error
	keys := map[string]bool{}
	for _, sub := range a.Source.NativeSubmissions(ctx, func(uid string) bool { return taken[uid] }) {
		keys[nativeKey(sub.Native)] = true
		errs = append(errs, a.submit(ctx, snap, sub))
	}
	for k := range a.ended {
		if !keys[k] {
			delete(a.ended, k) // its pods are gone
		}
	}
	errs = append(errs, a.explain(ctx, snap, pending))
	return errors.Join(errs...)
}

// gone cancels a pending native workload one of whose pods is gone, and
// reports whether it did. One placed meanwhile is left alone: its end is
// the executor's to report.
func (a *NativeAdmission) gone(ctx context.Context, w *core.Workload) bool {
	var lost []string
	for _, p := range w.Native.Pods {
		if !a.Source.NativePodLive(w.Native.Namespace, p) {
			lost = append(lost, p.Name)
		}
	}
	if len(lost) == 0 {
		return false
	}
	msg := fmt.Sprintf("pod %s/%s was deleted before gpufleet placed it", w.Native.Namespace, strings.Join(lost, ", "))
	if err := a.Store.CancelPending(ctx, w.ID, ReasonPodDeleted, msg, a.now()); err != nil {
		if !errors.Is(err, core.ErrConflict) {
			a.log().Error("cancel a native workload whose pods are gone", "workload", w.ID, "err", err)
		}
		return false
	}
	delete(a.shown, w.ID)
	a.log().Info("native workload cancelled: its pods are gone", "workload", w.ID, "pods", lost)
	return true
}

// submit admits one group of pods, or shows why it waits.
func (a *NativeAdmission) submit(ctx context.Context, snap *core.Snapshot, sub executor.NativeSubmission) error {
	if sub.Wait != nil {
		return a.Source.NativeWait(ctx, sub.Native, *sub.Wait)
	}
	key := nativeKey(sub.Native)
	if id, ok := a.ended[key]; ok {
		return a.Source.NativeWait(ctx, sub.Native, endedWait(id))
	}
	w, wait := a.admit(snap, sub)
	if wait != nil {
		return a.Source.NativeWait(ctx, sub.Native, *wait)
	}
	idem := &store.Idempotency{Key: key, Hash: key}
	out, created, err := a.Store.CreateWorkload(store.WithoutUserBound(ctx), w, idem, a.now())
	switch {
	case errors.Is(err, core.ErrNotFound):
		return a.Source.NativeWait(ctx, sub.Native, executor.NativeWait{Reason: ReasonUnknownTeam, Field: sub.TeamFrom, Warning: true,
			Message: fmt.Sprintf("team %q does not exist in gpufleet", sub.Team)})
	case errors.Is(err, core.ErrLimit):
		return a.Source.NativeWait(ctx, sub.Native, executor.NativeWait{Reason: ReasonPendingLimit, Message: err.Error()})
	case err != nil:
		return err
	case !created && out.Status.Phase.Terminal():
		a.ended[key] = out.ID
		return a.Source.NativeWait(ctx, sub.Native, endedWait(out.ID))
	}
	if created {
		a.log().Info("native pods admitted", "workload", out.ID, "namespace", sub.Native.Namespace, "name", sub.Native.Name,
			"pods", len(sub.Native.Pods), "team", out.Team, "priority", out.Priority)
	}
	return nil
}

func endedWait(id core.WorkloadID) executor.NativeWait {
	return executor.NativeWait{Reason: ReasonWorkloadEnded, Warning: true,
		Message: fmt.Sprintf("these pods were workload %s, which has ended in gpufleet (gpufleet get workload %s): gpufleet does not place them again; delete them, or make new ones", id, id)}
}

// nativeKey is the idempotency key of a group of pods: the same pods are
// one submission, whoever submits them and however often.
func nativeKey(n core.Native) string {
	uids := n.PodUIDs()
	slices.Sort(uids)
	h := sha256.Sum256([]byte(n.Cluster + "/" + strings.Join(uids, ",")))
	return "native-" + hex.EncodeToString(h[:16])
}

// NativeOwner is the owner (user) of native workloads: the namespace they
// come from.
func NativeOwner(ns string) string { return "kubernetes:" + ns }

// admit checks a submission as the API's submit does and makes its
// workload, or says why not.
func (a *NativeAdmission) admit(snap *core.Snapshot, sub executor.NativeSubmission) (*core.Workload, *executor.NativeWait) {
	refuse := func(reason, field, format string, args ...any) (*core.Workload, *executor.NativeWait) {
		return nil, &executor.NativeWait{Reason: reason, Field: field, Message: fmt.Sprintf(format, args...), Warning: true}
	}
	i := slices.IndexFunc(snap.Teams, func(t core.Team) bool { return string(t.Name) == sub.Team })
	if i < 0 {
		return refuse(ReasonUnknownTeam, sub.TeamFrom, "team %q does not exist in gpufleet (gpufleet get teams lists them)", sub.Team)
	}
	team := snap.Teams[i]
	n := sub.Native
	w := &core.Workload{Spec: core.Spec{
		Name:        n.Name,
		Team:        team.Name,
		Owner:       NativeOwner(n.Namespace),
		Kind:        core.KindJob,
		Priority:    sub.Priority,
		Request:     sub.Request,
		GracePeriod: sub.GracePeriod,
		Labels:      sub.Labels,
		Native:      n.Clone(),
	}}
	// The same admission as a submission through the API's.
	adm := core.Admission{Team: &team, Classes: a.Classes, Nodes: snap.Nodes}
	err := adm.Admit(w)
	var d *core.Disallowed
	var r *core.Refused
	switch {
	case err == nil:
		return w, nil
	case errors.As(err, &d):
		return refuse(ReasonClassNotAllowed, cmp.Or(sub.PriorityFrom, "priority"), "%s", d.Msg)
	case errors.As(err, &r):
		p := r.Problems[0]
		switch p.Reason {
		case core.AdmitUnknownClass:
			return refuse(p.Reason, sub.PriorityFrom, "%s", p.Problem)
		case core.AdmitBeyondGuarantee:
			return refuse(ReasonClassNotAllowed, cmp.Or(sub.PriorityFrom, "priority"), "%s", p.Problem)
		}
		return refuse(ReasonInfeasible, nativeField(p.Field), "%s", p.Problem)
	}
	return refuse(ReasonInfeasible, "", "%s", err.Error())
}

// nativeField names, for pods, the field of a request core.Feasible
// names as the API does.
func nativeField(f string) string {
	switch {
	case f == "resources.gpus":
		return "resources.limits[nvidia.com/gpu]"
	case f == "resources.cpu":
		return "resources.requests[cpu]"
	case f == "resources.memoryMiB":
		return "resources.requests[memory]"
	case f == "replicas":
		return "gang size"
	case f == "residency":
		return "the team's residency"
	case strings.HasPrefix(f, "nodeSelector"):
		return "spec." + f
	}
	return f
}

// explain shows on the pods of each pending native workload why it waits,
// as the scheduler last said, once per change; a message naming another
// team's workload names it as the API does for this team.
func (a *NativeAdmission) explain(ctx context.Context, snap *core.Snapshot, pending []*core.Workload) error {
	var errs []error
	seen := map[core.WorkloadID]bool{}
	for _, w := range pending {
		seen[w.ID] = true
		if w.Status.Reason == "" || w.Status.Message == "" {
			continue // just submitted: not scheduled yet
		}
		msg := RedactFor(snap, w.Team, w.Status.Message)
		text := w.Status.Reason + "\n" + msg
		if a.shown[w.ID] == text {
			continue
		}
		err := a.Source.NativeWait(ctx, *w.Native, executor.NativeWait{Reason: w.Status.Reason, Message: msg, Warning: true})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		a.shown[w.ID] = text
	}
	for id := range a.shown {
		if !seen[id] {
			delete(a.shown, id)
		}
	}
	return errors.Join(errs...)
}

// RedactFor rewrites a message about a workload of team for where anyone
// of that team may read it (a pod's Events): a workload of another team is
// named as the API names it for that team's readers.
func RedactFor(snap *core.Snapshot, team core.TeamName, msg string) string {
	teams := map[core.WorkloadID]core.TeamName{}
	for _, w := range slices.Concat(snap.Pending, snap.Running) {
		teams[w.ID] = w.Team
	}
	return core.Redact(msg, func(id core.WorkloadID) bool { return teams[id] == team })
}
