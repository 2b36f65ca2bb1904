package worker

import (
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/dmworker/dm-worker/pkg/errs"
)

// errSealed is returned by localSet.put once the set was taken for
// shutdown: the caller closes the object it just built.
var errSealed = errors.New("the source worker is stopping")

// localSet is the local objects of one key kind (subtasks, streams) by
// name, with the control-plane errors of names whose keys cannot be acted
// on. Only the reconcile of a name's key adds, replaces or removes its
// entry; everything else reads. takeAll seals it: nothing is added after
// the shutdown sweep has taken what it must stop.
type localSet[S comparable] struct {
	clock Clock
	what  string // the kind of object, in errors ("subtask")

	mu     sync.Mutex // guards the fields below
	items  map[string]S
	errs   map[string]errs.Error
	sealed bool // taken by takeAll; put refuses
}

func newLocalSet[S comparable](clock Clock, what string) *localSet[S] {
	return &localSet[S]{clock: clock, what: what, items: make(map[string]S), errs: make(map[string]errs.Error)}
}

// get returns the object of name.
func (l *localSet[S]) get(name string) (S, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.items[name]
	return s, ok
}

// put makes s the object of name. Once the set is sealed it refuses with
// an error wrapping errSealed; the caller then closes s.
func (l *localSet[S]) put(name string, s S) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sealed {
		return fmt.Errorf("%w: %s %q not added; it is closed again", errSealed, l.what, name)
	}
	l.items[name] = s
	return nil
}

// forget removes s unless name holds another object by now.
func (l *localSet[S]) forget(name string, s S) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.items[name] == s {
		delete(l.items, name)
	}
}

// values returns the objects, in no order.
func (l *localSet[S]) values() []S {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]S, 0, len(l.items))
	for _, s := range l.items {
		out = append(out, s)
	}
	return out
}

// takeAll empties and seals the set, errors included, and returns the
// objects for the caller to stop: nothing can be put after it.
func (l *localSet[S]) takeAll() map[string]S {
	l.mu.Lock()
	defer l.mu.Unlock()
	items := l.items
	l.items, l.errs, l.sealed = make(map[string]S), make(map[string]errs.Error), true
	return items
}

// setErr records (err != nil) or clears the control-plane error of name.
func (l *localSet[S]) setErr(name string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		delete(l.errs, name)
		return
	}
	l.errs[name] = errs.Entry(err, l.clock.Now())
}

// errors returns a copy of the recorded errors by name.
func (l *localSet[S]) errors() map[string]errs.Error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.errs)
}

// names lists every name with an object or an error, once.
func (l *localSet[S]) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.items)+len(l.errs))
	for n := range l.items {
		out = append(out, n)
	}
	for n := range l.errs {
		if _, ok := l.items[n]; !ok {
			out = append(out, n)
		}
	}
	return out
}
