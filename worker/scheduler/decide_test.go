package scheduler

import (
	"reflect"
	"testing"

	"github.com/dmworker/dm-worker/ha"
)

// snap builds a snapshot: alive workers, bound and relay keys as
// worker->source (each key's revision derives from its worker's name, see
// rev), and the sources with a config.
func snap(alive []string, bound, relay map[string]string, sources ...string) snapshot {
	s := snapshot{Rev: 100, Alive: map[string]bool{}, Bound: map[string]ha.Bound{},
		Relay: map[string]ha.Bound{}, Sources: map[string]bool{}}
	for _, w := range alive {
		s.Alive[w] = true
	}
	for w, src := range bound {
		s.Bound[w] = ha.Bound{Source: src, Worker: w, Revision: rev(w)}
	}
	for w, src := range relay {
		s.Relay[w] = ha.Bound{Source: src, Worker: w, Revision: 50 + rev(w)}
	}
	for _, src := range sources {
		s.Sources[src] = true
	}
	return s
}

// rev is the revision the fixture gives worker w's bound key.
func rev(w string) int64 { return int64(w[len(w)-1]) }

func TestDecide(t *testing.T) {
	tests := []struct {
		name string
		in   snapshot
		want plan
	}{
		{"dead worker moves to the lowest free worker",
			snap([]string{"w2", "w3", "w4"}, map[string]string{"w1": "s1", "w2": "s2"}, nil, "s1", "s2"),
			plan{Moves: []move{{Move: ha.Move{Source: "s1", To: "w3", From: map[string]int64{"w1": rev("w1")}}, Reason: ReasonWorkerDead}},
				Sources: map[string]string{"s1": "w3", "s2": "w2"}}},
		{"no free worker",
			snap([]string{"w2"}, map[string]string{"w1": "s1", "w2": "s2"}, nil, "s1", "s2"),
			plan{Unplaced: []string{"s1"}, Sources: map[string]string{"s1": "", "s2": "w2"}}},
		{"relay preference, relay keys follow",
			snap([]string{"w2", "w3"}, map[string]string{"w1": "s1"}, map[string]string{"w1": "s1", "w3": "s1"}, "s1"),
			plan{Moves: []move{{Move: ha.Move{Source: "s1", To: "w3", From: map[string]int64{"w1": rev("w1")},
				RelayFrom: map[string]int64{"w1": 50 + rev("w1"), "w3": 50 + rev("w3")}}, Reason: ReasonWorkerDead}},
				Sources: map[string]string{"s1": "w3"}}},
		{"relay of the dead worker moves to the lowest free worker",
			snap([]string{"w2", "w3"}, map[string]string{"w1": "s1"}, map[string]string{"w1": "s1"}, "s1"),
			plan{Moves: []move{{Move: ha.Move{Source: "s1", To: "w2", From: map[string]int64{"w1": rev("w1")},
				RelayFrom: map[string]int64{"w1": 50 + rev("w1")}}, Reason: ReasonWorkerDead}},
				Sources: map[string]string{"s1": "w2"}}},
		{"unbound sources take distinct free workers",
			snap([]string{"w1", "w2", "w3"}, nil, nil, "s1", "s2"),
			plan{Moves: []move{
				{Move: ha.Move{Source: "s1", To: "w1"}, Reason: ReasonUnbound},
				{Move: ha.Move{Source: "s2", To: "w2"}, Reason: ReasonUnbound}},
				Sources: map[string]string{"s1": "w1", "s2": "w2"}}},
		{"bound key of a source without config is left alone and its worker is not free",
			snap([]string{"w1", "w2"}, map[string]string{"w1": "gone"}, nil, "s1"),
			plan{Moves: []move{{Move: ha.Move{Source: "s1", To: "w2"}, Reason: ReasonUnbound}},
				Sources: map[string]string{"s1": "w2"}}},
		{"dead worker of a source without config is left alone",
			snap([]string{"w2"}, map[string]string{"w1": "gone"}, nil),
			plan{Sources: map[string]string{}}},
		{"two alive bound workers: no move",
			snap([]string{"w1", "w2", "w3"}, map[string]string{"w1": "s1", "w2": "s1"}, nil, "s1"),
			plan{Sources: map[string]string{"s1": "w1"}}},
		{"one alive and one dead bound worker: no move, the dead one's binding is stale",
			snap([]string{"w2", "w3"}, map[string]string{"w1": "s1", "w2": "s1"}, nil, "s1"),
			plan{Sources: map[string]string{"s1": "w2"}, Stale: []stale{{Worker: "w1", Source: "s1", Revision: rev("w1")}}}},
		{"two dead bound workers both lose the source",
			snap([]string{"w3"}, map[string]string{"w1": "s1", "w2": "s1"}, nil, "s1"),
			plan{Moves: []move{{Move: ha.Move{Source: "s1", To: "w3",
				From: map[string]int64{"w1": rev("w1"), "w2": rev("w2")}}, Reason: ReasonWorkerDead}},
				Sources: map[string]string{"s1": "w3"}}},
		{"malformed bound key (no source) makes its worker busy",
			snap([]string{"w1"}, map[string]string{"w1": ""}, nil, "s1"),
			plan{Unplaced: []string{"s1"}, Sources: map[string]string{"s1": ""}}},
		{"nothing alive",
			snap(nil, map[string]string{"w1": "s1"}, nil, "s1"),
			plan{Unplaced: []string{"s1"}, Sources: map[string]string{"s1": ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decide(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("decide =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}
