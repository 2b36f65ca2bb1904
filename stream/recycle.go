package stream

// recycleChunks and recycleBatches bound what a recycler keeps: about the
// chunks and event slices of the three batches a stream holds at most.
const (
	recycleChunks  = 48
	recycleBatches = 3
)

// recycler takes back the memory of batches a buffered sink wrote (their
// lines are in the file then, nothing refers to the events any more): the
// reader's arena chunks and the batches' event slices, so that a stream
// that writes hundreds of megabytes of events allocates a few: less work
// for the allocator and the GC. Full, it lets go of what it is given.
type recycler struct {
	chunks  chan []byte
	batches chan []Event
}

func newRecycler() *recycler {
	return &recycler{chunks: make(chan []byte, recycleChunks), batches: make(chan []Event, recycleBatches)}
}

// events is an empty event slice with room for n: a recycled one when
// there is one.
func (c *recycler) events(n int) []Event {
	select {
	case evs := <-c.batches:
		if cap(evs) >= n {
			return evs
		}
	default:
	}
	return make([]Event, 0, n)
}

// put takes back b's chunks and event slice once the sink wrote b (nil c:
// nothing is recycled).
func (c *recycler) put(b batch) {
	if c == nil {
		return
	}
	for _, ch := range b.chunks {
		select {
		case c.chunks <- ch:
		default:
		}
	}
	clear(b.events) // hold no event's memory
	select {
	case c.batches <- b.events[:0]:
	default:
	}
}
