package awsfake

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// receiveWait is how long a receive with nothing queued waits: a short
// long poll, so a closing test never waits the 20 s a consumer asks for.
const receiveWait = 50 * time.Millisecond

// defaultVisibility is SQS's default visibility timeout.
const defaultVisibility = 30 * time.Second

// queue is the SQS queue's state; its own lock, taken after the Cloud's
// if both are.
type queue struct {
	mu       sync.Mutex
	now      func() time.Time
	visible  []*message
	inflight map[string]*message // receipt handle -> message
	deleted  []string            // message IDs
	next     int
	failNext []int // HTTP statuses for the next receives
	arrived  chan struct{}
	closed   chan struct{}
	once     sync.Once
}

type message struct {
	id, body  string
	receives  int
	visibleAt time.Time
}

func (q *queue) init(now func() time.Time) {
	q.now, q.inflight = now, map[string]*message{}
	q.arrived, q.closed = make(chan struct{}, 1), make(chan struct{})
}

func (q *queue) close() { q.once.Do(func() { close(q.closed) }) }

func (q *queue) wake() {
	select {
	case q.arrived <- struct{}{}:
	default:
	}
}

// send queues a body and returns its message ID.
func (q *queue) send(body string) string {
	q.mu.Lock()
	q.next++
	id := fmt.Sprintf("5fea7756-0ea4-451a-a703-%012d", q.next)
	q.visible = append(q.visible, &message{id: id, body: body})
	q.mu.Unlock()
	q.wake()
	return id
}

// Send puts a raw message body on the queue and returns its message ID.
func (c *Cloud) Send(body string) string { return c.queue.send(body) }

// Deleted lists the IDs of the messages deleted so far, in order.
func (c *Cloud) Deleted() []string {
	c.queue.mu.Lock()
	defer c.queue.mu.Unlock()
	return append([]string(nil), c.queue.deleted...)
}

// InFlight counts the messages received and not deleted yet.
func (c *Cloud) InFlight() int {
	c.queue.mu.Lock()
	defer c.queue.mu.Unlock()
	return len(c.queue.inflight)
}

// Redeliver makes every received, undeleted message visible again at
// once, as SQS does when their visibility timeout passes.
func (c *Cloud) Redeliver() {
	q := &c.queue
	q.mu.Lock()
	for h, m := range q.inflight {
		delete(q.inflight, h)
		q.visible = append(q.visible, m)
	}
	q.mu.Unlock()
	q.wake()
}

// FailReceives makes the next ReceiveMessage calls answer with these HTTP
// statuses (503: ServiceUnavailable), one call each.
func (c *Cloud) FailReceives(statuses ...int) {
	c.queue.mu.Lock()
	defer c.queue.mu.Unlock()
	c.queue.failNext = append(c.queue.failNext, statuses...)
}

func sqsError(w http.ResponseWriter, status int, typ, msg string) {
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"__type":"com.amazonaws.sqs#%s","message":%q}`, typ, msg)
}

// serveSQS answers AWS JSON 1.0 (X-Amz-Target AmazonSQS.ReceiveMessage,
// AmazonSQS.DeleteMessage) for the one queue.
func (c *Cloud) serveSQS(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	var req struct {
		QueueUrl            string
		MaxNumberOfMessages int
		VisibilityTimeout   int
		ReceiptHandle       string
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.QueueUrl == "" {
		sqsError(w, http.StatusBadRequest, "InvalidAddress", "The address is not valid.")
		return
	}
	if req.QueueUrl != queueURL {
		sqsError(w, http.StatusBadRequest, "QueueDoesNotExist", "The specified queue does not exist.")
		return
	}
	q := &c.queue
	switch r.Header.Get("X-Amz-Target") {
	case "AmazonSQS.ReceiveMessage":
		// Instances whose boot delay passed change state now, so their
		// state-change events are in this receive.
		c.mu.Lock()
		c.advanceLocked()
		c.mu.Unlock()
		visibility := defaultVisibility
		if req.VisibilityTimeout > 0 {
			visibility = time.Duration(req.VisibilityTimeout) * time.Second
		}
		q.receive(w, r, req.MaxNumberOfMessages, visibility)
	case "AmazonSQS.DeleteMessage":
		q.mu.Lock()
		m, ok := q.inflight[req.ReceiptHandle]
		delete(q.inflight, req.ReceiptHandle)
		if ok {
			q.deleted = append(q.deleted, m.id)
		}
		q.mu.Unlock()
		if !ok {
			sqsError(w, http.StatusBadRequest, "ReceiptHandleIsInvalid", "The input receipt handle is invalid.")
			return
		}
		fmt.Fprint(w, `{}`)
	default:
		sqsError(w, http.StatusBadRequest, "UnsupportedOperation", "unsupported")
	}
}

func (q *queue) receive(w http.ResponseWriter, r *http.Request, limit int, visibility time.Duration) {
	q.mu.Lock()
	if len(q.failNext) > 0 {
		status := q.failNext[0]
		q.failNext = q.failNext[1:]
		q.mu.Unlock()
		sqsError(w, status, "ServiceUnavailable", "Service Unavailable")
		return
	}
	q.expireLocked()
	empty := len(q.visible) == 0
	q.mu.Unlock()
	if empty {
		t := time.NewTimer(receiveWait)
		defer t.Stop()
		select {
		case <-q.arrived:
		case <-t.C:
		case <-q.closed:
		case <-r.Context().Done():
			return
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	limit = min(max(limit, 1), 10)
	now := q.now()
	var msgs []map[string]any
	for len(q.visible) > 0 && len(msgs) < limit {
		m := q.visible[0]
		q.visible = q.visible[1:]
		m.receives++
		m.visibleAt = now.Add(visibility)
		handle := fmt.Sprintf("AQEB%s-%d", m.id, m.receives)
		q.inflight[handle] = m
		sum := md5.Sum([]byte(m.body))
		msgs = append(msgs, map[string]any{"MessageId": m.id, "ReceiptHandle": handle, "MD5OfBody": hex.EncodeToString(sum[:]),
			"Body": m.body, "Attributes": map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.receives)}})
	}
	out := map[string]any{}
	if len(msgs) > 0 {
		out["Messages"] = msgs
	}
	_ = json.NewEncoder(w).Encode(out)
}

// expireLocked makes messages whose visibility timeout passed visible.
func (q *queue) expireLocked() {
	now := q.now()
	for h, m := range q.inflight {
		if !now.Before(m.visibleAt) {
			delete(q.inflight, h)
			q.visible = append(q.visible, m)
		}
	}
}
