package fanout

import "sync"

// DefaultMemoBytes bounds what the memos of a hub's ring hold (Config.MemoBytes).
const DefaultMemoBytes = 32 << 20

// Memo holds what subscribers derive from one shared rows event (the
// stream package: its encoded change events), so that subscribers whose
// derivation is the same (the same key) derive it once: the first one
// computes, the others that come while it does wait for its result, later
// ones take it. A subscriber's GetEvent returns the memo of the event it
// returned through (*Sub).Memo; events read privately have none.
//
// A memo lives as long as its event: it is dropped from the ring with it
// (subscribers that still hold the event keep what it holds, and store
// nothing more). What the memos of one hub's ring hold is bounded by
// Config.MemoBytes: beyond it Do computes without storing. Values are
// shared read-only.
type Memo struct {
	hub *Hub

	mu      sync.Mutex
	entries []*memoEntry // one per key
	size    int64        // counted in hub.memoBytes while !dropped
	dropped bool
}

type memoEntry struct {
	key  any
	done chan struct{} // closed once val is set
	// val and ok are set before done is closed: ok says val holds a
	// result (false: its computation failed or found no room).
	val any
	ok  bool
}

// Do returns the value of key: the stored one, the one another subscriber
// is computing (waiting for it), or f's, stored when f reports ok and the
// hub's memo budget has room for its size. A nil Memo just calls f. f must
// not call Do of the same memo. Keys are compared with ==.
func (m *Memo) Do(key any, f func() (val any, size int, ok bool)) (any, bool) {
	if m == nil {
		v, _, ok := f()
		return v, ok
	}
	m.mu.Lock()
	for _, e := range m.entries {
		if e.key == key {
			m.mu.Unlock()
			<-e.done
			if e.ok { // set before done was closed
				return e.val, true
			}
			v, _, ok := f() // not stored (failed, or no room): compute one's own
			return v, ok
		}
	}
	if m.dropped {
		m.mu.Unlock()
		v, _, ok := f()
		return v, ok
	}
	e := &memoEntry{key: key, done: make(chan struct{})}
	m.entries = append(m.entries, e)
	m.mu.Unlock()

	var (
		v    any
		size int
		ok   bool
	)
	defer func() {
		m.mu.Lock()
		if ok && !m.dropped && m.hub.memoReserve(int64(size)) {
			e.val, e.ok = v, true
			m.size += int64(size)
		} else {
			// Not stored: a later subscriber computes (and may store) it.
			for i, x := range m.entries {
				if x == e {
					m.entries = append(m.entries[:i], m.entries[i+1:]...)
					break
				}
			}
		}
		close(e.done)
		m.mu.Unlock()
	}()
	v, size, ok = f()
	return v, ok
}

// drop releases the memo's budget: it is out of the ring.
func (m *Memo) drop() {
	m.mu.Lock()
	if !m.dropped {
		m.dropped = true
		m.hub.memoBytes.Add(-m.size)
		m.size = 0
	}
	m.mu.Unlock()
}

// memoReserve counts n more bytes of memos, or reports false when the
// budget has no room for them.
func (h *Hub) memoReserve(n int64) bool {
	for {
		cur := h.memoBytes.Load()
		if cur+n > h.cfg.MemoBytes {
			h.memoFull.Add(1)
			return false
		}
		if h.memoBytes.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}
