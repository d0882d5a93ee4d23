package fake_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/executortest"
	"github.com/gpufleet/gpufleet/internal/executor/fake"
)

func TestConformance(t *testing.T) {
	executortest.Run(t, func(t *testing.T) executor.Executor {
		return fake.New(fake.Options{})
	}, executortest.Options{
		Finish: func(e executor.Executor, id core.WorkloadID, attempt, code int) {
			if !e.(*fake.Executor).Finish(id, attempt, code) {
				t.Errorf("Finish(%s, %d): task is not running", id, attempt)
			}
		},
	})
}

func TestFinish(t *testing.T) {
	f := fake.New(fake.Options{})
	tk := executor.Task{WorkloadID: "w1", Attempt: 1, Command: []string{"train"}}
	if err := f.Start(t.Context(), tk); err != nil {
		t.Fatal(err)
	}
	if !f.Finish("w1", 1, 3) {
		t.Fatalf("Finish of a running task: got false")
	}
	// The exit is on the channel as soon as Finish returns.
	select {
	case x := <-f.Exits():
		if x.WorkloadID != "w1" || x.Attempt != 1 || x.ExitCode == nil || *x.ExitCode != 3 {
			t.Errorf("exit: got %+v, want w1 attempt 1 code 3", x)
		}
	default:
		t.Fatalf("no exit right after Finish")
	}
	if f.Finish("w1", 1, 0) {
		t.Errorf("second Finish: got true, want false")
	}
	if f.Finish("nobody", 1, 0) {
		t.Errorf("Finish of an unknown task: got true, want false")
	}
	if got := f.Running(); len(got) != 0 {
		t.Errorf("Running after Finish: got %v, want none", got)
	}
}

func TestRunningAndTask(t *testing.T) {
	f := fake.New(fake.Options{})
	start := func(id core.WorkloadID, attempt int) {
		t.Helper()
		tk := executor.Task{WorkloadID: id, Attempt: attempt, Command: []string{"train", string(id)}, Env: map[string]string{"A": "1"}}
		if err := f.Start(t.Context(), tk); err != nil {
			t.Fatal(err)
		}
	}
	start("b", 1)
	start("a", 2)
	start("a", 1)
	var got []string
	for _, tk := range f.Running() {
		got = append(got, fmt.Sprintf("%s/%d", tk.WorkloadID, tk.Attempt))
	}
	if diff := cmp.Diff([]string{"a/1", "a/2", "b/1"}, got); diff != "" {
		t.Errorf("Running (-want +got):\n%s", diff)
	}

	f.Finish("a", 1, 0)
	tk, ok := f.Task("a")
	if !ok || tk.Attempt != 1 {
		t.Errorf("Task(a): got attempt %d, %v; want the latest started, attempt 1", tk.Attempt, ok)
	}
	tk.Env["A"] = "changed"
	tk.Command[0] = "changed"
	if again, _ := f.Task("a"); again.Env["A"] != "1" || again.Command[0] != "train" {
		t.Errorf("Task returned state that the caller could change: %+v", again)
	}
	if _, ok := f.Task("nobody"); ok {
		t.Errorf("Task(nobody): got ok")
	}
}

func TestStopOnAVirtualClock(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	f := fake.New(fake.Options{Now: func() time.Time { return now }})
	polite := executor.Task{WorkloadID: "polite", Attempt: 1, Command: []string{"serve"}}
	stubborn := executor.Task{WorkloadID: "stubborn", Attempt: 1, Command: []string{"serve", fake.IgnoreSIGTERM}}
	for _, tk := range []executor.Task{polite, stubborn} {
		if err := f.Start(t.Context(), tk); err != nil {
			t.Fatal(err)
		}
		if err := f.Stop(t.Context(), tk.WorkloadID, 1, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	x := <-f.Exits()
	if x.WorkloadID != "polite" || x.Signal != "SIGTERM" || x.ExitCode != nil || !x.At.Equal(now) {
		t.Errorf("exit: got %+v, want polite killed by SIGTERM now", x)
	}

	now = now.Add(29 * time.Second)
	f.Tick()
	if got := f.Running(); len(got) != 1 || got[0].WorkloadID != "stubborn" {
		t.Errorf("Running before the grace has passed: got %v, want stubborn", got)
	}
	select {
	case x := <-f.Exits():
		t.Fatalf("exit before the grace has passed: %+v", x)
	default:
	}

	now = now.Add(time.Minute)
	f.Tick()
	select {
	case x := <-f.Exits():
		want := time.Date(2026, 11, 30, 8, 0, 30, 0, time.UTC)
		if x.WorkloadID != "stubborn" || x.Signal != "SIGKILL" || !x.At.Equal(want) {
			t.Errorf("exit: got %+v, want stubborn killed by SIGKILL at %v", x, want)
		}
	default:
		t.Fatalf("no exit after the grace has passed")
	}
}

func TestLogs(t *testing.T) {
	f := fake.New(fake.Options{})
	tk := executor.Task{WorkloadID: "w", Attempt: 1, Command: []string{"train", "--fast"}}
	if err := f.Start(t.Context(), tk); err != nil {
		t.Fatal(err)
	}
	f.Finish("w", 1, 0)
	tk.Attempt = 2
	if err := f.Start(t.Context(), tk); err != nil {
		t.Fatal(err)
	}
	f.Stop(t.Context(), "w", 2, time.Second)
	r, err := f.Logs("w")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	want := "started attempt 1: train --fast\nattempt 1 exited with code 0\n" +
		"started attempt 2: train --fast\nattempt 2 stopped (SIGTERM)\nattempt 2 killed by SIGTERM\n"
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("logs (-want +got):\n%s", diff)
	}
}

func TestStartFailure(t *testing.T) {
	f := fake.New(fake.Options{})
	err := f.Start(t.Context(), executor.Task{WorkloadID: "w", Attempt: 1, Command: []string{fake.NoSuchProgram}})
	if !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Start: got %v, want an error wrapping exec.ErrNotFound", err)
	}
	if got := f.Running(); len(got) != 0 {
		t.Errorf("Running after a failed start: got %v", got)
	}
}

func TestConcurrentUse(t *testing.T) {
	f := fake.New(fake.Options{})
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := core.WorkloadID(fmt.Sprintf("w%d", i))
			if err := f.Start(context.Background(), executor.Task{WorkloadID: id, Attempt: 1, Command: []string{"x"}}); err != nil {
				t.Error(err)
				return
			}
			f.Running()
			if i%2 == 0 {
				f.Finish(id, 1, 0)
			} else {
				f.Stop(context.Background(), id, 1, time.Second)
			}
		})
	}
	wg.Wait()
	seen := map[core.WorkloadID]bool{}
	for range n {
		x := <-f.Exits()
		if seen[x.WorkloadID] {
			t.Errorf("exit of %s twice", x.WorkloadID)
		}
		seen[x.WorkloadID] = true
	}
}
