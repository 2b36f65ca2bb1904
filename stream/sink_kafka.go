package stream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
)

// KafkaEventIDHeader is the record header holding the event ID.
const KafkaEventIDHeader = "dm-event-id"

// kafkaBuffered bounds the records the client buffers (kgo blocks Produce
// beyond it).
const kafkaBuffered = 4096

// kafkaSink produces one record per event to the topic: record key = the
// event key JSON, value = the event value JSON (the Debezium layout: the
// key is not repeated inside the value), header dm-event-id = the event
// ID. The producer is idempotent with acks=all, and records are
// partitioned by a hash of the key (Kafka's murmur2, as the Java client),
// so the events of one row stay in order on one partition.
//
// Write produces the batch and waits for every produce result; records
// that failed are produced again, in their order, with backoff until ctx
// is done (the idempotent producer fails a partition's later records with
// an earlier one, so per-key order survives a retry). Delivery is
// at-least-once: a retry after a lost ack can store a record twice, with
// the same dm-event-id for consumers to drop.
//
// The topic is never created by the sink: Probe fails when it is missing
// (partitions and replication are the operator's choice).
type kafkaSink struct {
	stream string
	topic  string
	cl     *kgo.Client
	logger *zap.Logger
}

func newKafkaSink(stream string, cfg config.KafkaSinkConfig, logger *zap.Logger) (*kafkaSink, error) {
	if len(cfg.Brokers) == 0 {
		return nil, fmt.Errorf("stream %q: sink.kafka.brokers must list at least one broker", stream)
	}
	if cfg.Topic == "" {
		return nil, fmt.Errorf("stream %q: sink.kafka.topic must not be empty", stream)
	}
	if cfg.PartitionBy != "" && cfg.PartitionBy != config.KafkaPartitionByKey {
		return nil, fmt.Errorf("stream %q: sink.kafka.partition-by %q: only %q is supported", stream, cfg.PartitionBy, config.KafkaPartitionByKey)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID("dm-worker"),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // also what the idempotent producer needs
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.MaxBufferedRecords(kafkaBuffered),
		kgo.ProducerLinger(0),
	}
	if cfg.SASL != nil {
		m, err := kafkaSASL(*cfg.SASL)
		if err != nil {
			return nil, fmt.Errorf("stream %q: %w", stream, err)
		}
		opts = append(opts, kgo.SASL(m))
	}
	if cfg.TLS != nil {
		tc, err := kafkaTLS(*cfg.TLS)
		if err != nil {
			return nil, fmt.Errorf("stream %q: %w", stream, err)
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("stream %q: sink.kafka: %w", stream, err)
	}
	return &kafkaSink{stream: stream, topic: cfg.Topic, cl: cl, logger: logger}, nil
}

// kafkaSASL is the mechanism of the sasl block.
func kafkaSASL(c config.KafkaSASL) (sasl.Mechanism, error) {
	switch strings.ToLower(c.Mechanism) {
	case config.SASLPlain:
		return plain.Auth{User: c.User, Pass: c.Password}.AsMechanism(), nil
	case config.SASLScramSHA256:
		return scram.Auth{User: c.User, Pass: c.Password}.AsSha256Mechanism(), nil
	case config.SASLScramSHA512:
		return scram.Auth{User: c.User, Pass: c.Password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("sink.kafka.sasl.mechanism %q: use plain, scram-sha-256 or scram-sha-512", c.Mechanism)
}

// kafkaTLS is the client TLS config of the tls block: brokers verified
// against ssl-ca (the system's pool when empty) and by the host name each
// is dialled at, ssl-cert/ssl-key presented when given. TLS 1.2 minimum.
func kafkaTLS(s config.Security) (*tls.Config, error) {
	if len(s.CertAllowedCN) > 0 {
		return nil, errors.New("sink.kafka.tls.cert-allowed-cn is not supported: brokers are verified by the host names in sink.kafka.brokers; remove it")
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.SSLCA != "" {
		pem, err := os.ReadFile(s.SSLCA)
		if err != nil {
			return nil, fmt.Errorf("sink.kafka.tls.ssl-ca: %w; check the path and that the worker can read it", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("sink.kafka.tls.ssl-ca %s: no PEM certificate in the file; give the CA that signed the brokers' certificates", s.SSLCA)
		}
	}
	switch {
	case s.SSLCert != "" && s.SSLKey != "":
		cert, err := tls.LoadX509KeyPair(s.SSLCert, s.SSLKey)
		if err != nil {
			return nil, fmt.Errorf("sink.kafka.tls.ssl-cert %s / ssl-key %s: %w; give a PEM certificate and its unencrypted PEM key", s.SSLCert, s.SSLKey, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	case s.SSLCert != "" || s.SSLKey != "":
		return nil, errors.New("sink.kafka.tls.ssl-cert and ssl-key must be given together")
	}
	return tc, nil
}

// Probe asks the brokers for the topic's metadata: the topic must exist
// and have partitions.
func (s *kafkaSink) Probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	details, err := kadm.NewClient(s.cl).ListTopics(ctx, s.topic)
	if err != nil {
		return fmt.Errorf("Kafka sink of stream %q: metadata of topic %q: %w; check sink.kafka.brokers, sasl and tls", s.stream, s.topic, err)
	}
	d, ok := details[s.topic]
	switch {
	case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("Kafka sink of stream %q: topic %q does not exist; create it (the sink does not create topics: partitions and replication are yours to choose)", s.stream, s.topic)
	case d.Err != nil:
		return fmt.Errorf("Kafka sink of stream %q: topic %q: %w", s.stream, s.topic, d.Err)
	case len(d.Partitions) == 0:
		return fmt.Errorf("Kafka sink of stream %q: topic %q has no partitions", s.stream, s.topic)
	}
	return nil
}

// Write produces the batch and returns once every record is acknowledged
// (see kafkaSink).
func (s *kafkaSink) Write(ctx context.Context, batch []Event) error {
	if len(batch) == 0 {
		return nil
	}
	recs := make([]*kgo.Record, len(batch))
	order := make(map[*kgo.Record]int, len(batch))
	for i, e := range batch {
		recs[i] = &kgo.Record{
			Key:     e.Key,
			Value:   e.Value,
			Headers: []kgo.RecordHeader{{Key: KafkaEventIDHeader, Value: []byte(e.ID)}},
		}
		order[recs[i]] = i
	}
	pending := recs
	what := fmt.Sprintf("Kafka sink of stream %q: produce %d event(s) to topic %q", s.stream, len(batch), s.topic)
	return retryLoop(ctx, s.logger, what, func(ctx context.Context) error {
		failed, err := s.produce(ctx, pending)
		if err != nil {
			return err
		}
		if len(failed) == 0 {
			return nil
		}
		slices.SortFunc(failed, func(a, b kafkaResult) int { return order[a.r] - order[b.r] })
		pending = pending[:0]
		for _, f := range failed {
			// Produced again from scratch: the partitioner picks the same
			// partition by the key.
			*f.r = kgo.Record{Key: f.r.Key, Value: f.r.Value, Headers: f.r.Headers}
			pending = append(pending, f.r)
		}
		return fmt.Errorf("%d of %d record(s) not acknowledged, first event %s: %w", len(failed), len(recs), batch[order[failed[0].r]].ID, failed[0].err)
	})
}

// kafkaResult is the produce result of one record.
type kafkaResult struct {
	r   *kgo.Record
	err error
}

// produce hands recs to the client and waits for every result; it returns
// the failed ones. When ctx ends first it returns ctx's error at once: the
// idempotent producer cannot fail records a broker may have received, so
// they stay with the client (at most kafkaBuffered) and are delivered, or
// failed by Close, later; each promise has room in the channel, so none
// blocks the client.
func (s *kafkaSink) produce(ctx context.Context, recs []*kgo.Record) ([]kafkaResult, error) {
	results := make(chan kafkaResult, len(recs))
	for _, r := range recs {
		s.cl.Produce(ctx, r, func(r *kgo.Record, err error) { results <- kafkaResult{r, err} })
	}
	var failed []kafkaResult
	for range recs {
		select {
		case res := <-results:
			if res.err != nil {
				failed = append(failed, res)
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("records still awaiting the broker's ack: %w", context.Cause(ctx))
		}
	}
	return failed, nil
}

// Close flushes nothing (Write waited for every ack) and closes the client.
func (s *kafkaSink) Close() error {
	s.cl.Close()
	return nil
}
