// Package answers takes answers for agent.Await over HTTP and writes them
// to the Kafka topic the job reads its answers from
// (agent.ApplyWithAnswers).
//
// Why through the topic, not straight into the operator: the topic is the
// one path into the job, so its guarantees cover answers that came over
// HTTP too: the source's offsets are in the job's checkpoints with the
// keys' unused answers, so an accepted answer is neither lost by a crash
// nor applied twice by a restore. An HTTP answer is accepted (202) only
// once the broker has acknowledged it.
//
// # Guarantees
//
//	A1. A request gets 202 only after the answer was written to the topic
//	    (acknowledged by the broker), with the answer's key as the record
//	    key (so answers of a key keep their order in one partition).
//	A2. Anything else gets an error status and writes nothing: 405 for a
//	    method other than POST, 413 for a body over Options.MaxBody, 400
//	    for a body that is not one JSON agent.Answer with a key and a wait
//	    (the message names the accepted fields), 502 when the write fails.
//	A3. Answer values are never logged.
//
// # Limits
//
// A client that retries after a lost 202 writes the answer twice. With an
// ID (the waitID given to Wait.Ask) the second copy names a wait that has
// ended and is dropped (agent, answersForEndedWaits); without
// one it could answer the key's next wait of that name: send IDs.
package answers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/kafkasec"
)

// Options configure NewHandler.
type Options struct {
	// Brokers are the Kafka bootstrap brokers. Required.
	Brokers []string
	// Security is TLS and SASL to the brokers (package kafkasec); the
	// zero value is plaintext without authentication.
	Security kafkasec.Security
	// Topic is the answers topic the job reads. Required.
	Topic string
	// MaxBody bounds a request's body, in bytes; 0 means 64 KiB.
	MaxBody int64
	// WriteTimeout bounds the write of one answer to the topic; 0 means
	// 10 s.
	WriteTimeout time.Duration
}

func (o Options) validate() error {
	var errs []error
	if len(o.Brokers) == 0 {
		errs = append(errs, errors.New("answers: Options.Brokers is empty; want the Kafka bootstrap brokers, such as localhost:9092"))
	}
	if o.Topic == "" {
		errs = append(errs, errors.New("answers: Options.Topic is empty; want the answers topic the job reads (agent.ApplyWithAnswers)"))
	}
	if o.MaxBody < 0 {
		errs = append(errs, fmt.Errorf("answers: Options.MaxBody %d: want 0 (64 KiB) or a positive number of bytes", o.MaxBody))
	}
	if o.WriteTimeout < 0 {
		errs = append(errs, fmt.Errorf("answers: Options.WriteTimeout %v: want 0 (10s) or a positive duration", o.WriteTimeout))
	}
	return errors.Join(errs...)
}

// Handler is the HTTP endpoint: POST a JSON agent.Answer, such as
// {"key":"customer-7","wait":"approve","id":"<waitID>","value":{"approved":true}}.
// It is safe for concurrent use; Close it after the server that uses it.
type Handler struct {
	opts Options
	cl   *kgo.Client
}

// NewHandler validates opts and connects a producer to the brokers.
func NewHandler(opts Options) (*Handler, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.MaxBody == 0 {
		opts.MaxBody = 64 << 10
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	sec, err := opts.Security.Opts()
	if err != nil {
		return nil, fmt.Errorf("answers: Options.Security: %w", err)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(opts.Brokers...), kgo.DefaultProduceTopic(opts.Topic)}, sec...)...)
	if err != nil {
		return nil, fmt.Errorf("answers: connecting to %v: %w", opts.Brokers, err)
	}
	return &Handler{opts: opts, cl: cl}, nil
}

// Close closes the producer.
func (h *Handler) Close() { h.cl.Close() }

// ServeHTTP implements http.Handler (guarantees A1-A3).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "answers: POST a JSON answer {key, wait, id, value}", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("answers: the body is over %d bytes", h.opts.MaxBody), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "answers: reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	a, err := decode(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	v, _ := json.Marshal(a) // a was decoded from JSON: it encodes
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.WriteTimeout)
	defer cancel()
	if err := h.cl.ProduceSync(ctx, &kgo.Record{Key: []byte(a.Key), Value: v}).FirstErr(); err != nil {
		http.Error(w, fmt.Sprintf("answers: writing to topic %q: %v", h.opts.Topic, h.opts.Security.Explain(err)), http.StatusBadGateway)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// decode reads one answer: a JSON object with the fields of agent.Answer
// only, a key and a wait.
func decode(body []byte) (agent.Answer, error) {
	var a agent.Answer
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, fmt.Errorf("answers: the body is not a JSON answer (%v); want {\"key\": KEY, \"wait\": NAME, \"id\": WAIT_ID (optional), \"value\": ANY_JSON}", err)
	}
	if dec.More() {
		return a, errors.New("answers: the body has more than one JSON value; want one answer {key, wait, id, value}")
	}
	if a.Key == "" || a.Wait == "" {
		return a, errors.New("answers: an answer needs \"key\" (the agent key it is for) and \"wait\" (the wait's name, agent.Wait.Name)")
	}
	return a, nil
}
