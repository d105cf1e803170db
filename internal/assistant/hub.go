package assistant

import (
	"sync"
	"time"
)

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
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	closed bool
}

type subscriber struct {
	actor string
	ch    chan Delivery
}

func newHub() *hub { return &hub{subs: map[*subscriber]struct{}{}} }

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
func (a *Assistant) Subscribe(actorID string) (<-chan Delivery, func()) {
	if a.bus != nil {
		a.bus.listen(nil) // deliveries of the other instances, from now on
	}
	s := &subscriber{actor: actorID, ch: make(chan Delivery, 16)}
	h := a.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(s.ch)
		return s.ch, func() {}
	}
	h.subs[s] = struct{}{}
	return s.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[s]; ok {
			delete(h.subs, s)
			close(s.ch)
		}
	}
}
