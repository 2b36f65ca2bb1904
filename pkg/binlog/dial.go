package binlog

import (
	"context"
	"net"
	"time"
)

// DeadlineDialer dials a source with a deadline on the whole connection, so
// that a source that stops answering during the handshake or the start of a
// binlog dump cannot hang the reader; Clear lifts it once the dump runs
// (a watchdog on events and heartbeats takes over, instead of a read
// deadline set before every packet). Use it as go-mysql's
// BinlogSyncerConfig.Dialer. One goroutine at a time may use it.
type DeadlineDialer struct {
	Timeout time.Duration
	conn    net.Conn // the last connection dialed
}

// Dial connects and sets the deadline.
func (d *DeadlineDialer) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if err := c.SetDeadline(time.Now().Add(d.Timeout)); err != nil {
		_ = c.Close()
		return nil, err
	}
	d.conn = c
	return c, nil
}

// Clear removes the deadline of the last connection dialed.
func (d *DeadlineDialer) Clear() error {
	if d.conn == nil {
		return nil
	}
	return d.conn.SetDeadline(time.Time{})
}
