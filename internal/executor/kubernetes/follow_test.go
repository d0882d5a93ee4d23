package kubernetes

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpufleet/gpufleet/internal/testwait"
)

// TestFollowLogs: the latest attempt's pod is followed (Follow: true) and
// its lines come out as the pod writes them; a container not started yet is
// waited for; the stream ends with the pod's output.
func TestFollowLogs(t *testing.T) {
	k := newFakeKubelet(t)
	e := k.newExecutor(t, Options{})
	if _, err := e.FollowLogs(t.Context(), "wl-follow", false); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no pod yet: err %v, want fs.ErrNotExist", err)
	}
	podOut, podIn := io.Pipe()
	var mu sync.Mutex
	var opened []string
	e.openLogs = func(_ context.Context, ns, name string, o *corev1.PodLogOptions) (io.ReadCloser, error) {
		mu.Lock()
		defer mu.Unlock()
		opened = append(opened, ns+"/"+name+map[bool]string{true: " follow", false: ""}[o.Follow])
		if len(opened) == 1 {
			return nil, errors.New("container \"main\" in pod is waiting to start: ContainerCreating")
		}
		return podOut, nil
	}
	if err := e.Start(t.Context(), gpuTask("wl-follow", "n1", 1)); err != nil {
		t.Fatal(err)
	}
	var r io.ReadCloser
	var err error
	testwait.Until(t, 5*time.Second, "the informer to see the pod", func() (bool, string) {
		r, err = e.FollowLogs(t.Context(), "wl-follow", false)
		return err == nil, fmt.Sprint(err)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	br := bufio.NewReader(r)
	line := func() string {
		t.Helper()
		s, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read: %q, %v", s, err)
		}
		return s
	}
	if got := line(); !strings.Contains(got, "pod gpufleet-research/wl-follow-1") {
		t.Errorf("header %q", got)
	}
	// Each line is read before the next is written: the log is followed,
	// not read once.
	for _, want := range []string{"epoch 1\n", "epoch 2\n"} {
		go podIn.Write([]byte(want))
		if got := line(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	podIn.Close() // the container ends
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Errorf("after the end: %q, %v; want the end of the stream", rest, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "gpufleet-research/wl-follow-1 follow"; len(opened) != 2 || opened[0] != want || opened[1] != want {
		t.Errorf("opened %q, want two tries to follow the pod", opened)
	}
}
