package sim

import (
	"cmp"
	"fmt"
	// math/rand (v1), not v2 as the rest of the package: the FGD authors'
	// simulator draws from v1's global source after rand.Seed, and only
	// v1's generator (rand.NewSource), seeded the same way, gives the same
	// numbers; Int, Intn, Shuffle, Float64 and Perm on a *rand.Rand are
	// the global functions' algorithms. Its stream is frozen by the Go 1
	// promise. Nothing else here uses it.
	"math/rand"
	"slices"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// AuthorsOrder returns the pods in the order the FGD authors' simulator
// (hkust-adsl/kubernetes-scheduler-simulator, commit 8f3d641) places them
// when run as in their experiments (shufflePod true, tune ratio inflate,
// tune seed seed), with the copies it appends. Their Simulate
// (pkg/simulator/core.go) does, on math/rand's global source:
//
//  1. rand.Seed(seed), then one rand.Int(): the argument of a debug log
//     line, evaluated at every log level;
//  2. SortClusterPods: the pods sorted by name, then rand.Shuffle;
//  3. TunePodsByNodeTotalResource, with D the pods' summed GPU demand
//     (milli-GPU; a whole-GPU pod counts 1000 a device) and T = inflate ×
//     capacity, in float64:
//     - D < T (tuneUpPods): each draw takes rand.Intn(n) over the n pods
//     sorted by name, and stops the tuning when D plus that pod's
//     per-device share (their MilliGpu, not its total: 1000 for a
//     whole-GPU pod of any size, 0 for a CPU-only pod) exceeds T;
//     otherwise the pod's copy, named NAME-tuned-i (i from 0), is
//     appended and its total demand added to D. So a CPU-only copy never
//     stops it, and a multi-GPU copy may take D past T;
//     - D > T (tuneDownPods; multigpu30 to 50 at 1.3): rand.Intn over the
//     current sequence, the pod at that index removed, until D ≤ T;
//     - D = T: nothing.
//
// CPU-only pods are in the sequence, shuffled and copied like the others:
// their simulator places them too. It loads each row of the pod CSV as one
// pod under the row's name (data/pod_csv_to_yaml.py) and cannot hold two
// pods of one name, so a repeated name is an error here. Names compare
// byte by byte, as Go's < in their sort.Slice. Nothing else draws from
// their global source between the seed and the end of the tuning: no
// daemon sets in their inputs, and the UUIDs their pods get come from
// crypto/rand.
func AuthorsOrder(pods []trace.Pod, seed int64, inflate float64, capacity int64) ([]trace.Pod, error) {
	seq, _, err := authorsOrder(pods, seed, inflate, capacity)
	return seq, err
}

// authorsOrder is AuthorsOrder, with the generator in the state their
// global source is in after the tuning.
func authorsOrder(pods []trace.Pod, seed int64, inflate float64, capacity int64) ([]trace.Pod, *rand.Rand, error) {
	sorted := slices.Clone(pods)
	slices.SortFunc(sorted, func(a, b trace.Pod) int { return cmp.Compare(a.Name, b.Name) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Name == sorted[i-1].Name {
			return nil, nil, fmt.Errorf("order %s: pod name %q comes twice; the authors' simulator needs each name once", OrderAuthors, sorted[i].Name)
		}
	}
	r := rand.New(rand.NewSource(seed))
	r.Int() // log.Debugf("Random Seed: %d, Random Int: %d", seed, rand.Int())
	seq := slices.Clone(sorted)
	r.Shuffle(len(seq), func(i, j int) { seq[i], seq[j] = seq[j], seq[i] })

	var total int64
	for _, p := range seq {
		total += authorsTotalMilliGPU(p)
	}
	// Their guards: no tuning with a ratio not above 0, and a panic on a
	// workload or cluster without GPUs (tuning up would never stop). Here
	// the sequence is then left as shuffled.
	target := inflate * float64(capacity)
	if inflate <= 0 || total <= 0 || capacity <= 0 {
		return seq, r, nil
	}
	switch {
	case float64(total) > target:
		for float64(total) > target && len(seq) > 0 {
			idx := r.Intn(len(seq))
			total -= authorsTotalMilliGPU(seq[idx])
			seq = slices.Delete(seq, idx, idx+1)
		}
	case float64(total) < target:
		for i := 0; ; i++ {
			p := sorted[r.Intn(len(sorted))]
			if float64(total+authorsMilliGPU(p)) > target {
				break
			}
			total += authorsTotalMilliGPU(p)
			p.Name = fmt.Sprintf("%s-tuned-%d", p.Name, i)
			seq = append(seq, p)
		}
	}
	return seq, r, nil
}

// authorsRun returns the authors' sequence (AuthorsOrder) and the names
// their simulator gives the nodes (authorsNodeNames), index for index with
// nodes.
func authorsRun(nodes []core.Node, pods []trace.Pod, seed int64, inflate float64, capacity int64) ([]trace.Pod, []string, error) {
	seq, r, err := authorsOrder(pods, seed, inflate, capacity)
	if err != nil {
		return nil, nil, err
	}
	return seq, authorsNodeNames(nodes, r), nil
}

// authorsReflectorDraws is how many numbers the authors' global source
// gives between the end of the tuning and the rand.Perm that renames the
// nodes: their RunCluster first starts the scheduler's informers, and
// each informer's reflector draws one rand.Float64 (the timeout of its
// first watch, client-go tools/cache/reflector.go) on the same global
// source. The storage classes' informer started before the seed; the
// others (pods, nodes, CSI nodes, volumes and claims, services, the
// controllers the spreading plugins list, disruption budgets, …) start
// there. Ten is measured, not counted: with it, bestfit on this order
// gives their published BestFit allocation at every level 0–130% on the
// cases checked (docs/SIMULATOR.md); with 9 or 11 it is off by up to
// 0.4 points on the same cases.
const authorsReflectorDraws = 10

// authorsNodeNames returns the names the authors' simulator gives the
// nodes, index for index with nodes, r being their global source after
// the tuning: syncClusterResourceList sorts the nodes by name, draws
// rand.Perm(len(nodes)) and prefixes the i-th with "%04d-" and the
// permutation's i-th number. Their scheduler breaks a tie between nodes
// of equal score by the smallest name (selectHost in their vendored
// Kubernetes), so a tie goes to the smallest prefix: a random order of
// the nodes, the same for every policy of a seed.
func authorsNodeNames(nodes []core.Node, r *rand.Rand) []string {
	for range authorsReflectorDraws {
		r.Float64()
	}
	byName := make([]int, len(nodes))
	for i := range byName {
		byName[i] = i
	}
	slices.SortStableFunc(byName, func(a, b int) int { return cmp.Compare(nodes[a].Name, nodes[b].Name) })
	perm := r.Perm(len(nodes))
	names := make([]string, len(nodes))
	for i, n := range byName {
		names[n] = fmt.Sprintf("%04d-%s", perm[i], nodes[n].Name)
	}
	return names
}

// authorsMilliGPU is the authors' MilliGpu of a pod (their PodResource):
// the share of each device it asks for, 1000 for a whole-GPU pod, 0
// without GPUs.
func authorsMilliGPU(p trace.Pod) int64 {
	return min(max(p.Request.MilliGPU, 0), 1000)
}

// authorsTotalMilliGPU is their TotalMilliGpu, MilliGpu × GpuNumber: the
// pod's GPU demand as this package counts it (trace.Pod.GPUs) for the
// pods of an openb trace.
func authorsTotalMilliGPU(p trace.Pod) int64 {
	if w := p.Request.WholeGPUs(); w > 0 {
		return int64(w) * 1000
	}
	return authorsMilliGPU(p)
}
