package executor

import (
	"sync"
)

// Outbox delivers exits on a buffered channel and never blocks the sender:
// when the buffer is full, exits queue in memory and one goroutine feeds
// them to the channel in order.
type Outbox struct {
	C       chan Exit // read exits here
	mu      sync.Mutex
	queue   []Exit
	pumping bool // a goroutine owns the queue, and may hold one exit in flight
}

// NewOutbox returns an outbox whose channel holds buffer exits.
func NewOutbox(buffer int) *Outbox {
	return &Outbox{C: make(chan Exit, buffer)}
}

// Put delivers x, never blocking.
func (o *Outbox) Put(x Exit) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.pumping {
		select {
		case o.C <- x:
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

func (o *Outbox) pump() {
	for {
		o.mu.Lock()
		if len(o.queue) == 0 {
			o.pumping = false
			o.queue = nil
			o.mu.Unlock()
			return
		}
		x := o.queue[0]
		o.queue[0] = Exit{}
		o.queue = o.queue[1:]
		o.mu.Unlock()
		o.C <- x
	}
}
