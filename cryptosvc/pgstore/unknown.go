package pgstore

import (
	"context"
	"time"

	"golang.org/x/time/rate"

	"github.com/cipherd/cipherd/cryptosvc"
)

// Reads on miss of names memory holds no live key of: a key another
// replica created moments ago, whose notification is still on its way, or
// a name nobody created. Anyone who may call the data routes can send the
// second kind in any number, so these reads are batched and paced rather
// than made one per name: a missed name joins the batch waiting to start
// (or begins one), a batch starts only after every name in it joined (so
// it sees every key created before its callers asked), and batches start
// at most unknownRate a second after a burst of unknownBurst
// (golang.org/x/time/rate). A flood of distinct names thus costs the
// database a few queries a second, each of at most maxUnknownBatch index
// lookups; a key created elsewhere is found by the next batch, at once
// unless misses of unknown names have used up the burst.
//
// A name a batch found absent is answered not found without a query for
// absentTTL, unless the key reaches memory meanwhile (created here or
// notified), which forgets the answer at once.
const (
	unknownRate     = 5
	unknownBurst    = 5
	maxUnknownBatch = 256
	absentTTL       = time.Second
	// maxAbsent bounds the names remembered absent, past which names
	// found absent are not remembered. The pace of batches keeps them
	// below it already ((unknownBurst+unknownRate)*maxUnknownBatch names
	// within absentTTL); the bound does not depend on that arithmetic.
	maxAbsent = 4096
)

// unknownBatch is one read of names, and the callers waiting for it.
type unknownBatch struct {
	names map[string]struct{}
	done  chan struct{}
	err   error
}

// unknownReads is the state of the reads on miss of unknown names, guarded
// by Store.flightMu.
type unknownReads struct {
	limit   *rate.Limiter
	next    *unknownBatch        // filling; nil when no caller waits
	running bool                 // a goroutine runs the batches
	absent  map[string]time.Time // name → end of its not-found answer
}

func newUnknownReads() unknownReads {
	return unknownReads{
		limit:  rate.NewLimiter(unknownRate, unknownBurst),
		absent: make(map[string]time.Time),
	}
}

// refreshUnknown reads name, which memory held no live key of when the
// caller looked, through the next batch, and returns what memory then
// holds.
func (s *Store) refreshUnknown(ctx context.Context, name string, enough func(*cryptosvc.StoredKey) bool) (*cryptosvc.StoredKey, error) {
	s.flightMu.Lock()
	// A batch stores its snapshot before it takes flightMu, so under it
	// memory either holds what the running batch found or that batch has
	// not ended: a caller that looked as it ended is served by it, not by
	// one more read (TestUnknownNameCoalesced).
	snap := s.snap.Load()
	if snap == nil {
		s.flightMu.Unlock()
		return nil, cryptosvc.ErrClosed
	}
	if k := snap.keys[name].key; k != nil {
		s.flightMu.Unlock()
		if enough != nil && enough(k) {
			return k, nil
		}
		f := s.joinFlight(name)
		return s.getAfter(ctx, name, f.done, &f.err)
	}
	u := &s.unknown
	if until, ok := u.absent[name]; ok && s.now().Before(until) {
		s.flightMu.Unlock()
		return nil, notFound(name)
	}
	if u.next == nil {
		u.next = &unknownBatch{names: make(map[string]struct{}), done: make(chan struct{})}
	}
	b := u.next
	if _, ok := b.names[name]; !ok && len(b.names) >= maxUnknownBatch {
		// A flood of names fills the batch: this one is not read.
		s.flightMu.Unlock()
		return nil, notFound(name)
	}
	b.names[name] = struct{}{}
	if !u.running {
		u.running = true
		go s.runUnknown()
	}
	s.flightMu.Unlock()
	return s.getAfter(ctx, name, b.done, &b.err)
}

// runUnknown runs the waiting batches, one at a time and paced, until none
// waits.
func (s *Store) runUnknown() {
	u := &s.unknown
	for {
		// The wait comes before the batch is taken, so that the names
		// missed meanwhile join it.
		err := u.limit.Wait(s.ctx)
		s.flightMu.Lock()
		b := u.next
		u.next = nil
		if b == nil {
			u.running = false
			s.flightMu.Unlock()
			return
		}
		s.flightMu.Unlock()
		if err != nil {
			b.err = cryptosvc.ErrClosed // Wait fails only once Close began
		} else {
			b.err = s.readUnknown(b.names)
		}
		close(b.done)
	}
}

// readUnknown reads names into memory and remembers those found absent.
func (s *Store) readUnknown(names map[string]struct{}) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.opTO)
	defer cancel()
	select {
	case s.misses <- struct{}{}:
		defer func() { <-s.misses }()
	case <-ctx.Done():
		return classify(ctx.Err())
	}
	list := make([]string, 0, len(names))
	for name := range names {
		list = append(list, name)
	}
	s.reads.Add(1)
	rows, err := s.pool.Query(ctx, keyRows+` WHERE k.name = ANY($1) ORDER BY k.name, v.version`, list)
	if err != nil {
		return classify(err)
	}
	found, err := s.scanKeys(rows)
	if err != nil {
		return err
	}
	s.apply(found, false, false)

	now := s.now()
	s.flightMu.Lock()
	defer s.flightMu.Unlock()
	absent := s.unknown.absent
	for name, until := range absent {
		if !now.Before(until) {
			delete(absent, name)
		}
	}
	for _, name := range list {
		if len(absent) >= maxAbsent {
			break
		}
		// Read under flightMu, which apply takes after storing its
		// snapshot to forget absent names: a key that reached memory
		// since the query is either seen here or forgotten after.
		if snap := s.snap.Load(); snap != nil && snap.keys[name].key == nil {
			absent[name] = now.Add(absentTTL)
		}
	}
	return nil
}

// forgetAbsent drops the not-found answers of names that memory now holds.
func (s *Store) forgetAbsent(names []string) {
	s.flightMu.Lock()
	for _, name := range names {
		delete(s.unknown.absent, name)
	}
	s.flightMu.Unlock()
}
