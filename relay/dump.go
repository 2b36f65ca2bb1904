package relay

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/google/uuid"
)

// dumpReadBuffer is the most a dump connection peeks at once: events up
// to it are handed over where the read-ahead holds them, larger ones are
// read into the caller's buffer.
const dumpReadBuffer = 256 << 10

// dumpConn is one binlog dump connection to the source. go-mysql's client
// does the handshake (TLS included) and the commands, as go-mysql's
// BinlogSyncer does (checksum awareness, MariaDB's GTID capability, the
// heartbeat period, COM_REGISTER_SLAVE, COM_BINLOG_DUMP(_GTID)); once the
// dump has started, the connection is read ahead (readAhead) and events
// are handed over in place, or read into the caller's reused buffer, or in
// pieces for events too large to hold: no allocation and no copy per
// packet, and memory that does not grow with the events' size. Semi-sync
// and compression stay off.
//
// One goroutine reads; close may be called from any goroutine and makes a
// blocked read fail.
type dumpConn struct {
	c  *client.Conn
	ra *readAhead // reads c's connection ahead, once the dump has started

	seq  uint8 // sequence number of the next packet
	left int   // unread payload bytes of the current packet
	full bool  // the current packet has MaxPayloadLen bytes: the payload goes on in the next one
}

// dumpParams say how to reach the source and whom to register as.
type dumpParams struct {
	addr, user, password string
	tls                  *tls.Config
	dial                 client.Dialer
	serverID             uint32
	port                 uint16 // reported in COM_REGISTER_SLAVE
	mariadb              bool
	heartbeat            time.Duration
	flags                uint16 // COM_BINLOG_DUMP flags
}

// dialDump connects, makes the session a checksum-aware replica with
// heartbeats and registers it; the dump itself starts with dumpFrom or
// dumpGTID.
func dialDump(ctx context.Context, p dumpParams) (*dumpConn, error) {
	c, err := client.ConnectWithDialer(ctx, "", p.addr, p.user, p.password, "", p.dial, func(c *client.Conn) error {
		c.SetTLSConfig(p.tls)
		c.SetAttributes(map[string]string{"_client_role": "binary_log_listener"})
		return nil
	})
	if err != nil {
		return nil, err
	}
	d := &dumpConn{c: c}
	if err := d.register(p); err != nil {
		return nil, errors.Join(err, d.close())
	}
	return d, nil
}

// register runs the session setup of a replica and COM_REGISTER_SLAVE.
func (d *dumpConn) register(p dumpParams) error {
	r, err := d.c.Execute("SHOW GLOBAL VARIABLES LIKE 'BINLOG_CHECKSUM'")
	if err != nil {
		return fmt.Errorf("read binlog_checksum: %w", err)
	}
	if s, _ := r.GetString(0, 1); s != "" {
		// Any value tells the server that the replica is checksum-aware:
		// events then come as they are in the binlog, checksums included.
		if _, err := d.c.Execute(`SET @master_binlog_checksum='NONE', @source_binlog_checksum='NONE'`); err != nil {
			return fmt.Errorf("declare checksum awareness: %w", err)
		}
	}
	setup := []string{fmt.Sprintf("SET @master_heartbeat_period=%d", p.heartbeat.Nanoseconds())}
	if p.mariadb {
		// MARIA_SLAVE_CAPABILITY_GTID: the replica understands GTID events.
		setup = append(setup, "SET @mariadb_slave_capability=4")
	}
	id := uuid.NewString()
	setup = append(setup, fmt.Sprintf("SET @slave_uuid = '%s', @replica_uuid = '%s'", id, id))
	for _, q := range setup {
		if _, err := d.c.Execute(q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	host, _ := os.Hostname()
	host = host[:min(len(host), 255)]
	user := p.user[:min(len(p.user), 255)]
	data := make([]byte, 4, 4+1+4+1+len(host)+1+len(user)+1+2+4+4)
	data = append(data, mysql.COM_REGISTER_SLAVE)
	data = binary.LittleEndian.AppendUint32(data, p.serverID)
	data = append(append(data, byte(len(host))), host...)
	data = append(append(data, byte(len(user))), user...)
	data = append(data, 0) // no password
	data = binary.LittleEndian.AppendUint16(data, p.port)
	data = binary.LittleEndian.AppendUint32(data, 0) // replication rank
	data = binary.LittleEndian.AppendUint32(data, 0) // master id
	if err := d.command(data); err != nil {
		return fmt.Errorf("register as replica %d: %w", p.serverID, err)
	}
	if _, err := d.c.ReadOKPacket(); err != nil {
		return fmt.Errorf("register as replica %d: %w", p.serverID, err)
	}
	return nil
}

// command sends one command packet (data starts with 4 bytes for the
// packet header).
func (d *dumpConn) command(data []byte) error {
	d.c.ResetSequence()
	return d.c.WritePacket(data)
}

// dumpFrom starts the dump at a file position.
func (d *dumpConn) dumpFrom(p dumpParams, name string, pos uint32) error {
	pos = max(pos, magicSize)
	data := make([]byte, 4, 4+1+4+2+4+len(name))
	data = append(data, mysql.COM_BINLOG_DUMP)
	data = binary.LittleEndian.AppendUint32(data, pos)
	data = binary.LittleEndian.AppendUint16(data, p.flags)
	data = binary.LittleEndian.AppendUint32(data, p.serverID)
	data = append(data, name...)
	if err := d.command(data); err != nil {
		return fmt.Errorf("send COM_BINLOG_DUMP from %s:%d: %w", name, pos, err)
	}
	d.started()
	return nil
}

// dumpGTID starts the dump after a GTID set: a MariaDB one in the
// slave_connect_state variable (strict mode, as a real replica of this
// relay's kind), a MySQL one in COM_BINLOG_DUMP_GTID.
func (d *dumpConn) dumpGTID(p dumpParams, set mysql.GTIDSet) error {
	if p.mariadb {
		for _, q := range []string{fmt.Sprintf("SET @slave_connect_state='%s'", set.String()), "SET @slave_gtid_strict_mode=1"} {
			if _, err := d.c.Execute(q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return d.dumpFrom(p, "", 0) // the position is ignored after slave_connect_state
	}
	enc := set.Encode()
	data := make([]byte, 4, 4+1+2+4+4+8+4+len(enc))
	data = append(data, mysql.COM_BINLOG_DUMP_GTID)
	data = binary.LittleEndian.AppendUint16(data, 0)
	data = binary.LittleEndian.AppendUint32(data, p.serverID)
	data = binary.LittleEndian.AppendUint32(data, 0) // no file name
	data = binary.LittleEndian.AppendUint64(data, magicSize)
	data = binary.LittleEndian.AppendUint32(data, uint32(len(enc)))
	data = append(data, enc...)
	if err := d.command(data); err != nil {
		return fmt.Errorf("send COM_BINLOG_DUMP_GTID after %s: %w", set, err)
	}
	d.started()
	return nil
}

// started switches reading to the dump's packets: nothing is buffered in
// go-mysql's reader, since the server sends nothing between the answer to
// the last command and the dump. From here on the connection is read
// ahead on a goroutine of its own (see readAhead).
func (d *dumpConn) started() {
	d.seq = d.c.Sequence
	d.ra = newReadAhead(d.c.Conn.Conn, dumpReadBuffer)
}

// id is the connection id the source gave the connection.
func (d *dumpConn) id() uint32 { return d.c.GetConnectionID() }

// close closes the connection, which makes a blocked read fail, and ends
// the read-ahead.
func (d *dumpConn) close() error {
	err := d.c.Close()
	if d.ra != nil {
		d.ra.stop()
	}
	return err
}

// errDumpEnded is returned when the source ends the dump with an EOF packet.
var errDumpEnded = errors.New("the source ended the binlog dump")

// nextEvent goes to the start of the next event; the caller then reads it
// with peek and skip or with read, all of it, before the next call.
func (d *dumpConn) nextEvent() error {
	if d.left != 0 {
		return fmt.Errorf("binlog dump packet holds %d bytes after its event", d.left)
	}
	if d.full { // the last event filled its packets exactly: an empty packet ends it
		if err := d.nextPacket(); err != nil {
			return err
		}
		if d.left != 0 {
			return fmt.Errorf("binlog dump packet continues an event with %d bytes more than its size", d.left)
		}
	}
	if err := d.nextPacket(); err != nil {
		return err
	}
	var status [1]byte
	if err := d.read(status[:]); err != nil {
		return err
	}
	switch status[0] {
	case mysql.OK_HEADER:
		return nil
	case mysql.ERR_HEADER:
		// go-mysql decodes code, '#', state and message without bounds checks.
		if d.left < 8 {
			return fmt.Errorf("binlog dump error packet of %d bytes is too short", 1+d.left)
		}
		msg := make([]byte, 1+d.left)
		msg[0] = status[0]
		if err := d.read(msg[1:]); err != nil {
			return err
		}
		return d.c.HandleErrorPacket(msg)
	case mysql.EOF_HEADER:
		return errDumpEnded
	}
	return fmt.Errorf("binlog dump packet starts with 0x%02x", status[0])
}

// peek returns the next n bytes of the current event without reading
// them, when they are in the current packet and fit the read buffer; ok is
// false otherwise. They stay valid until the next call of any method.
func (d *dumpConn) peek(n int) (b []byte, ok bool, err error) {
	if n > d.left || n > dumpReadBuffer {
		return nil, false, nil
	}
	if b, err = d.ra.Peek(n); err != nil {
		return nil, false, fmt.Errorf("read binlog dump packet: %w", err)
	}
	return b, true, nil
}

// skip reads the n bytes peek returned.
func (d *dumpConn) skip(n int) {
	d.ra.Discard(n)
	d.left -= n
}

// nextPacket reads a packet header.
func (d *dumpConn) nextPacket() error {
	var h [4]byte
	if _, err := io.ReadFull(d.ra, h[:]); err != nil {
		return fmt.Errorf("read binlog dump packet: %w", err)
	}
	if h[3] != d.seq {
		return fmt.Errorf("binlog dump packet sequence %d, want %d", h[3], d.seq)
	}
	d.seq++
	d.left = int(h[0]) | int(h[1])<<8 | int(h[2])<<16
	d.full = d.left == mysql.MaxPayloadLen
	return nil
}

// read reads the next len(p) bytes of the current event, which may go on
// in the next packets.
func (d *dumpConn) read(p []byte) error {
	for len(p) > 0 {
		if d.left == 0 {
			if !d.full {
				return errors.New("binlog dump packet ends before its event")
			}
			if err := d.nextPacket(); err != nil {
				return err
			}
			continue
		}
		n := min(len(p), d.left)
		if _, err := io.ReadFull(d.ra, p[:n]); err != nil {
			return fmt.Errorf("read binlog dump packet: %w", err)
		}
		p, d.left = p[n:], d.left-n
	}
	return nil
}
