package kubernetes

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpufleet/gpufleet/internal/core"
)

// podLogs opens one pod's log; tests replace it (the fake clientset answers
// every log request with the same fixed text and cannot follow).
type podLogs func(ctx context.Context, ns, name string, o *corev1.PodLogOptions) (io.ReadCloser, error)

func (e *Executor) openPodLogs(ctx context.Context, ns, name string, o *corev1.PodLogOptions) (io.ReadCloser, error) {
	if e.openLogs != nil {
		return e.openLogs(ctx, ns, name, o)
	}
	return e.opts.Client.CoreV1().Pods(ns).GetLogs(name, o).Stream(ctx)
}

// followRetry is the wait between two tries to follow a pod whose container
// has not started yet.
const followRetry = 250 * time.Millisecond

// FollowLogs streams a workload's log as it is written, which a pod log,
// unlike a file, does not allow by reading again: the pods of earlier
// attempts are read whole (skipped when currentOnly), then the pods of the
// latest attempt are followed (Follow: true), their lines interleaved as
// they come, until their containers have ended or ctx is done. The error
// wraps fs.ErrNotExist when the workload has no pod yet.
func (e *Executor) FollowLogs(ctx context.Context, id core.WorkloadID, currentOnly bool) (io.ReadCloser, error) {
	return e.streamLogs(ctx, id, true, currentOnly)
}

// streamLogs writes the logs of a workload's pods, attempt after attempt,
// each after a header line: whole, or with follow the latest attempt's pods
// as they grow. currentOnly leaves out the earlier attempts.
func (e *Executor) streamLogs(ctx context.Context, id core.WorkloadID, follow, currentOnly bool) (io.ReadCloser, error) {
	// A log stream through a partition would wait without end, and the
	// pods of a cluster not heard from are not known yet: first, whether
	// the cluster answers.
	if err := e.unreachableErr(); err != nil {
		return nil, fmt.Errorf("logs of %s: %w", id, err)
	}
	pods := e.workloadPods(id)
	if len(pods) == 0 {
		return nil, fmt.Errorf("logs of %s: %w", id, fs.ErrNotExist)
	}
	last := pods[len(pods)-1].Labels[LabelAttempt]
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	go func() {
		defer cancel()
		var current []*corev1.Pod
		for _, p := range pods {
			latest := p.Labels[LabelAttempt] == last
			switch {
			case follow && latest:
				current = append(current, p)
				continue
			case currentOnly && !latest:
				continue
			}
			fmt.Fprintf(pw, "==> pod %s/%s (attempt %s) <==\n", p.Namespace, p.Name, p.Labels[LabelAttempt])
			rc, err := e.openPodLogs(ctx, p.Namespace, p.Name, &corev1.PodLogOptions{Container: containerName})
			if err != nil {
				fmt.Fprintf(pw, "(no logs: %v)\n", err)
				continue
			}
			_, err = io.Copy(pw, rc)
			rc.Close()
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		var mu sync.Mutex // one line at a time from the followed pods
		var wg sync.WaitGroup
		for _, p := range current {
			wg.Go(func() { e.followPod(ctx, p, pw, &mu) })
		}
		wg.Wait()
		pw.Close()
	}()
	return &logReader{PipeReader: pr, cancel: cancel}, nil
}

// followPod copies one pod's log, line by line, as it grows. A container
// that has not started yet is waited for, as long as its pod exists.
func (e *Executor) followPod(ctx context.Context, p *corev1.Pod, w io.Writer, mu *sync.Mutex) {
	write := func(b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		_, err := w.Write(b)
		return err
	}
	if write(fmt.Appendf(nil, "==> pod %s/%s (attempt %s) <==\n", p.Namespace, p.Name, p.Labels[LabelAttempt])) != nil {
		return
	}
	for {
		rc, err := e.openPodLogs(ctx, p.Namespace, p.Name, &corev1.PodLogOptions{Container: containerName, Follow: true})
		if err == nil {
			defer rc.Close()
			br := bufio.NewReader(rc)
			for {
				line, err := br.ReadBytes('\n')
				if len(line) > 0 && write(line) != nil {
					return
				}
				if err != nil {
					return // the container ended, or ctx is done
				}
			}
		}
		// Most often the container is still being created: try again
		// while the pod is there and has not ended.
		cur, gerr := e.pods.Pods(p.Namespace).Get(p.Name)
		if gerr != nil || cur.Status.Phase == corev1.PodSucceeded || cur.Status.Phase == corev1.PodFailed {
			write(fmt.Appendf(nil, "(no logs: %v)\n", err))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(followRetry):
		}
	}
}
