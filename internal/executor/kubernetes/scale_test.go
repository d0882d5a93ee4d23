package kubernetes

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// scaleMix is the mix of sizes the scale test submits, in GPUs and shares
// of the workloads: 2,000 workloads ask for 678 of 800 GPUs.
var scaleMix = []struct {
	gpus  quantity.Milli
	share float64
}{{250, 0.80}, {500, 0.15}, {1000, 0.04}, {2000, 0.008}, {4000, 0.002}}

// TestScale measures how fast gpufleet gets a cluster of KWOK GPU nodes
// full of pods: GPUFLEET_K8S_SCALE_NODES nodes (100) of 8 GPUs,
// GPUFLEET_K8S_SCALE_WORKLOADS workloads (2,000) of mixed sizes (scaleMix)
// submitted by GPUFLEET_K8S_SCALE_SUBMITTERS clients at once (32). It
// reports the time until all are Running and the pods per second. It runs
// only with GPUFLEET_K8S_SCALE=1 (and a cluster): it takes a minute or more.
func TestScale(t *testing.T) {
	if os.Getenv("GPUFLEET_K8S_SCALE") != "1" {
		t.Skip("GPUFLEET_K8S_SCALE=1 is not set")
	}
	nodes, workloads, submitters := envInt(t, "GPUFLEET_K8S_SCALE_NODES", 100), envInt(t, "GPUFLEET_K8S_SCALE_WORKLOADS", 2000), envInt(t, "GPUFLEET_K8S_SCALE_SUBMITTERS", 32)
	t0 := time.Now()
	x := newE2E(t, nodes, 8)
	t.Logf("%d KWOK nodes × 8 GPUs Ready in %.1f s", nodes, time.Since(t0).Seconds())
	s := x.start()
	s.client.HTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: submitters}}
	ctx := t.Context()

	// The sizes, shuffled so that they arrive mixed.
	var sizes []quantity.Milli
	var asked quantity.Milli
	for i, m := range scaleMix {
		n := int(m.share * float64(workloads))
		if i == len(scaleMix)-1 {
			n = workloads - len(sizes)
		}
		for range n {
			sizes = append(sizes, m.gpus)
			asked += m.gpus
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(sizes), func(i, j int) { sizes[i], sizes[j] = sizes[j], sizes[i] })
	t.Logf("%d workloads asking for %s GPUs of %d", len(sizes), asked, nodes*8)

	// Pods Running in the cluster, as the cluster says, every 500 ms.
	ns := x.namespace("default")
	var firstRunning, allMade, allRunning atomic.Int64
	var timeline samples
	stopWatch := make(chan struct{})
	var watchWG sync.WaitGroup
	watchWG.Go(func() {
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(500 * time.Millisecond):
			}
			list, err := x.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
			if err != nil {
				continue
			}
			n := 0
			for _, p := range list.Items {
				if p.Status.Phase == corev1.PodRunning {
					n++
				}
			}
			now := time.Since(t0).Nanoseconds()
			timeline.add(now, len(list.Items), n)
			if n > 0 {
				firstRunning.CompareAndSwap(0, now)
			}
			if len(list.Items) >= len(sizes) {
				allMade.CompareAndSwap(0, now)
			}
			if n >= len(sizes) {
				allRunning.CompareAndSwap(0, now)
				return
			}
		}
	})

	start := time.Now()
	t0 = start
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, submitters)
	for range submitters {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(sizes) {
					return
				}
				w := &api.Workload{Priority: "training", Resources: api.Resources{GPUs: sizes[i]}, Command: sleepCmd(), GracePeriodSeconds: 1}
				if _, err := s.client.SubmitWorkload(ctx, w, ""); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	submitted := time.Since(start)
	select {
	case err := <-errs:
		t.Fatalf("submit: %v", err)
	default:
	}
	t.Logf("%d submits by %d clients in %.1f s (%.0f/s)", len(sizes), submitters, submitted.Seconds(), float64(len(sizes))/submitted.Seconds())

	x.waitFor(10*time.Minute, "all Running (API)", func() (bool, string) {
		ws, err := s.client.AllWorkloads(ctx, api.ListOptions{Phase: api.PhaseRunning})
		if err != nil {
			return false, err.Error()
		}
		time.Sleep(400 * time.Millisecond) // the poll's pace: a list of every workload is not free
		return len(ws) == len(sizes), fmt.Sprintf("%d of %d Running", len(ws), len(sizes))
	})
	apiRunning := time.Since(start)
	x.waitFor(time.Minute, "all pods Running (cluster)", func() (bool, string) { return allRunning.Load() > 0, "" })
	close(stopWatch)
	watchWG.Wait()
	all := time.Duration(allRunning.Load())
	t.Logf("first pod Running after %.1f s; all %d pods Running (cluster) after %.1f s; all Running in gpufleet's API after %.1f s",
		time.Duration(firstRunning.Load()).Seconds(), len(sizes), all.Seconds(), apiRunning.Seconds())
	made := time.Duration(allMade.Load())
	t.Logf("all %d pods created by gpufleet after %.1f s: %.1f pods/s created; %.1f pods/s from submit start to all Running",
		len(sizes), made.Seconds(), float64(len(sizes))/made.Seconds(), float64(len(sizes))/all.Seconds())
	t.Logf("timeline (s: pods made / Running): %s", timeline.String())
	x.waitAgree(2 * time.Minute)
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// samples is the scale test's timeline of pods made and Running.
type samples struct {
	mu   sync.Mutex
	last time.Duration
	text []byte
}

func (s *samples) add(at int64, made, running int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := time.Duration(at)
	if s.text != nil && d-s.last < 2*time.Second {
		return
	}
	s.last = d
	s.text = fmt.Appendf(s.text, "%.0f: %d/%d  ", d.Seconds(), made, running)
}

func (s *samples) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.text)
}
