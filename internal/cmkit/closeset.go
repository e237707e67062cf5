package cmkit

import (
	"maps"
	"slices"
	"sync"
)

// CloseSet is what a link closes when it closes: its listeners, or its
// connections. Add fails once the set is closed, so nothing added after
// the link's Close escapes it; Close hands the members back, once, for the
// link to close or detach outside the set's lock. The zero value is an
// empty, open set.
type CloseSet[T comparable] struct {
	mu     sync.Mutex
	m      map[T]struct{}
	closed bool
}

// Add adds x and reports true, or reports false when the set is closed.
func (s *CloseSet[T]) Add(x T) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.m == nil {
		s.m = make(map[T]struct{})
	}
	s.m[x] = struct{}{}
	return true
}

// Remove takes x out of the set; it does nothing when x is not in it or
// the set is closed.
func (s *CloseSet[T]) Remove(x T) {
	s.mu.Lock()
	delete(s.m, x)
	s.mu.Unlock()
}

// Close closes the set and returns its members, in no order. first is
// false when the set was closed already; members is then empty.
func (s *CloseSet[T]) Close() (members []T, first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	s.closed = true
	members = slices.Collect(maps.Keys(s.m))
	s.m = nil
	return members, true
}
