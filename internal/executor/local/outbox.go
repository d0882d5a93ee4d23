package local

import (
	"sync"

	"github.com/gpufleet/gpufleet/internal/executor"
)

// outbox delivers exits on a buffered channel and never blocks the sender:
// when the buffer is full, exits queue in memory and one goroutine feeds
// them to the channel in order.
type outbox struct {
	ch      chan executor.Exit
	mu      sync.Mutex
	queue   []executor.Exit
	pumping bool // a goroutine owns the queue, and may hold one exit in flight
}

func newOutbox(buffer int) *outbox {
	return &outbox{ch: make(chan executor.Exit, buffer)}
}

func (o *outbox) put(x executor.Exit) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.pumping {
		select {
		case o.ch <- x:
			return
		default:
		}
	}
	o.queue = append(o.queue, x)
	if !o.pumping {
		o.pumping = true
		go o.pump()
	}
}

func (o *outbox) pump() {
	for {
		o.mu.Lock()
		if len(o.queue) == 0 {
			o.pumping = false
			o.queue = nil
			o.mu.Unlock()
			return
		}
		x := o.queue[0]
		o.queue[0] = executor.Exit{}
		o.queue = o.queue[1:]
		o.mu.Unlock()
		o.ch <- x
	}
}
