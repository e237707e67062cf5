package ibcm

import (
	"container/heap"
	"time"
)

// dueHeap is a min-heap of connections by deadline (container/heap);
// each connection knows its place (Conn.heapAt) so that a new deadline
// moves it in O(log n).
type dueHeap []*Conn

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapAt, h[j].heapAt = i+1, j+1
}

func (h *dueHeap) Push(x any) {
	c := x.(*Conn)
	c.heapAt = len(*h) + 1
	*h = append(*h, c)
}

func (h *dueHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	c.heapAt = 0
	return c
}

// setDue gives c the deadline t (zero: none) and keeps the heap in order.
func (a *Agent) setDue(c *Conn, t time.Time) {
	c.due = t
	switch {
	case t.IsZero():
		if c.heapAt != 0 {
			heap.Remove(&a.due, c.heapAt-1)
		}
	case c.heapAt != 0:
		heap.Fix(&a.due, c.heapAt-1)
	default:
		heap.Push(&a.due, c)
	}
}
