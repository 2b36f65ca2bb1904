package fanout

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Subscribers asking one memo for the same key at once compute it once and
// all get that value; another key is computed on its own; a failed
// computation is stored for nobody.
func TestMemoOncePerKey(t *testing.T) {
	h := New(Config{})
	defer h.Close()
	m := &Memo{hub: h}
	var calls atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	got := make([]any, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, ok := m.Do("a", func() (any, int, bool) {
				calls.Add(1)
				<-release // the others arrive while the first computes
				return new(int), 10, true
			})
			if !ok {
				t.Error("Do(a) not ok")
			}
			got[i] = v
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("key a computed %d times, want once", n)
	}
	for i := range got {
		if got[i] != got[0] {
			t.Fatalf("subscriber %d got another value than subscriber 0", i)
		}
	}
	if v, _ := m.Do("b", func() (any, int, bool) { return "b", 1, true }); v != "b" {
		t.Fatalf("key b gave %v", v)
	}
	if _, ok := m.Do("c", func() (any, int, bool) { return nil, 0, false }); ok {
		t.Fatal("a failed computation reported ok")
	}
	if v, ok := m.Do("c", func() (any, int, bool) { return "c2", 1, true }); !ok || v != "c2" {
		t.Fatalf("after a failure the next subscriber got %v, %v; want its own value", v, ok)
	}
	if st := h.Stats(); st.MemoBytes != 12 {
		t.Fatalf("memo bytes %d, want 12 (a 10, b 1, c2 1)", st.MemoBytes)
	}
	m.drop()
	if st := h.Stats(); st.MemoBytes != 0 {
		t.Fatalf("memo bytes after drop %d", st.MemoBytes)
	}
	// A dropped memo still gives what it holds and stores nothing new.
	if v, _ := m.Do("b", func() (any, int, bool) { return "new", 1, true }); v != "b" {
		t.Fatalf("dropped memo: key b gave %v", v)
	}
	m.Do("d", func() (any, int, bool) { return "d", 1, true })
	if v, _ := m.Do("d", func() (any, int, bool) { return "d2", 1, true }); v != "d2" {
		t.Fatalf("dropped memo stored key d: got %v", v)
	}
}

// Beyond Config.MemoBytes a value is computed but not stored.
func TestMemoBudget(t *testing.T) {
	h := New(Config{MemoBytes: 100})
	defer h.Close()
	m1, m2 := &Memo{hub: h}, &Memo{hub: h}
	m1.Do("k", func() (any, int, bool) { return 1, 80, true })
	m2.Do("k", func() (any, int, bool) { return 2, 40, true })
	if v, _ := m2.Do("k", func() (any, int, bool) { return 3, 40, true }); v != 3 {
		t.Fatalf("over budget: got %v, want a fresh 3", v)
	}
	st := h.Stats()
	if st.MemoBytes != 80 || st.MemoFull != 2 {
		t.Fatalf("stats %+v, want 80 bytes and 2 refusals (no room twice)", st)
	}
	m1.drop()
	m2.Do("k", func() (any, int, bool) { return 4, 40, true })
	if v, _ := m2.Do("k", func() (any, int, bool) { return 5, 40, true }); v != 4 {
		t.Fatalf("after m1 left the ring: got %v, want the stored 4", v)
	}
}
