package assistant

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// MaxListeners bounds the delivery listeners (Subscribe) one process
// holds at once: each is a goroutine, a 16-slot channel and, behind
// GET /deliveries or the dashboard, an open connection.
const MaxListeners = 1024

// ErrTooManyListeners is Subscribe's error past MaxListeners; the HTTP
// layers answer 503 with Retry-After.
var ErrTooManyListeners = errors.New("too many delivery listeners")

// Delivery is a reply produced outside the request that asked for it: a
// turn resumed after an approval, or a scheduled run on a channel that
// cannot push (cli, api, web).
type Delivery struct {
	Channel string    `json:"channel"`
	ActorID string    `json:"actor_id"`
	ChatID  string    `json:"chat_id,omitempty"`
	Text    string    `json:"text"`
	At      time.Time `json:"at"`
}

// hub fans deliveries out to subscribers of an actor. A slow subscriber
// loses deliveries rather than blocking the turn (the reply is in the
// session either way).
type hub struct {
	max    int // listeners at most (MaxListeners)
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	closed bool
}

type subscriber struct {
	actor string
	ch    chan Delivery
}

func newHub() *hub { return &hub{max: MaxListeners, subs: map[*subscriber]struct{}{}} }

func (h *hub) publish(d Delivery) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.actor != "" && s.actor != d.ActorID {
			continue
		}
		select {
		case s.ch <- d:
		default:
		}
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		close(s.ch)
		delete(h.subs, s)
	}
}

// Subscribe returns the deliveries for actorID ("" = every actor) until
// cancel is called or the assistant closes (the channel is then closed):
// this process's, and with a database every other instance's as well
// (deliveryBus), from the first Subscribe on.
//
// Past MaxListeners listeners in this process it returns
// ErrTooManyListeners (wrapped) and no channel.
func (a *Assistant) Subscribe(actorID string) (<-chan Delivery, func(), error) {
	return a.hub.subscribe(actorID, func() {
		if a.bus != nil {
			a.bus.listen(nil) // deliveries of the other instances, from now on
		}
	})
}

func (h *hub) subscribe(actorID string, started func()) (<-chan Delivery, func(), error) {
	s := &subscriber{actor: actorID, ch: make(chan Delivery, 16)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(s.ch)
		return s.ch, func() {}, nil
	}
	if len(h.subs) >= h.max {
		return nil, nil, fmt.Errorf("%w: %d already listen in this process; retry later", ErrTooManyListeners, len(h.subs))
	}
	started()
	h.subs[s] = struct{}{}
	return s.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[s]; ok {
			delete(h.subs, s)
			close(s.ch)
		}
	}, nil
}
