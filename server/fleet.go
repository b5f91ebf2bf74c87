package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/server/speedview"
)

// The fleet view, GET /speed/fleet: each replica on a shared keystore (a
// cryptosvc.FleetStore: PostgreSQL) publishes a report of its host, its
// selection and the speed of the implementations it uses, every
// fleet_interval and whenever its speed table changes; any replica answers
// with every report younger than fleetAgeOut intervals, so the view is the
// same through a load balancer whichever replica it picks. A replica that
// stops reporting drops out of the view after those intervals. On a keystore
// that only this process uses, the view is this replica alone.

// fleetAgeOut is how many fleet intervals a report stays in the view: a
// replica must miss more than two reports in a row to drop out.
const fleetAgeOut = 3

// fleetReadEvery is how often GET /speed/fleet reads the keystore at most:
// the route needs no credential, so requests arriving together share one
// read instead of each making one (a report is at most fleet_interval old
// anyway).
const fleetReadEvery = time.Second

// fleetReads holds the last read of the replicas' reports.
type fleetReads struct {
	mu    sync.Mutex
	at    time.Time
	hosts []cryptosvc.PublishedHost
}

// get returns the reports read within fleetReadEvery, or reads them with
// read; callers that come during a read wait for it. A failed read is not
// kept.
func (f *fleetReads) get(ctx context.Context, read func(context.Context) ([]cryptosvc.PublishedHost, error)) ([]cryptosvc.PublishedHost, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.at.IsZero() && time.Since(f.at) < fleetReadEvery {
		return f.hosts, nil
	}
	hosts, err := read(ctx)
	if err != nil {
		return nil, err
	}
	f.at, f.hosts = time.Now(), hosts
	return hosts, nil
}

// newReplicaID returns a replica id: random per process, so that replicas
// on one host, and a replica restarted, are told apart.
func newReplicaID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// fleetReport returns this replica's report.
func (sp *speedState) fleetReport() *speedview.FleetHost {
	hostname, _ := os.Hostname()
	return speedview.NewHost(sp.snapshot(), sp.s.replica, hostname)
}

// publishFleet publishes this replica's report every interval, and when
// the speed table changes, until ctx ends. Only a shared keystore has a
// fleet to publish to.
func (s *Server) publishFleet(ctx context.Context) {
	fs, ok := s.store.(cryptosvc.FleetStore)
	if !ok {
		return
	}
	t := time.NewTicker(s.cfg.FleetInterval)
	defer t.Stop()
	for {
		s.publishFleetOnce(ctx, fs)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.speed.changed:
		}
	}
}

// publishFleetOnce publishes the report; a failure is logged at warn (the
// keystore's health is reported elsewhere) and retried at the next tick.
func (s *Server) publishFleetOnce(ctx context.Context, fs cryptosvc.FleetStore) {
	b, err := json.Marshal(s.speed.fleetReport())
	if err == nil {
		err = fs.PublishHost(ctx, s.replica, b)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("host report not published to the keystore; retried at the next interval", zap.Error(err))
	}
}

// fleetView reads the reports of the live replicas, this one's from
// memory, and flags the replicas whose selection differs from most.
func (s *Server) fleetView(ctx context.Context) (*speedview.FleetView, error) {
	maxAge := fleetAgeOut * s.cfg.FleetInterval
	v := &speedview.FleetView{PinnedKeys: map[string]int{}, MaxAge: maxAge.Seconds(), Generated: time.Now().UTC()}
	self := s.speed.fleetReport()
	self.Self = true
	v.Hosts = []speedview.FleetHost{*self}
	if fs, ok := s.store.(cryptosvc.FleetStore); ok {
		v.Shared = true
		published, err := s.fleetReads.get(ctx, func(ctx context.Context) ([]cryptosvc.PublishedHost, error) {
			return fs.Hosts(ctx, maxAge)
		})
		if err != nil {
			return nil, err
		}
		for _, p := range published {
			if p.Replica == s.replica {
				continue
			}
			var h speedview.FleetHost
			if err := json.Unmarshal(p.Report, &h); err != nil {
				s.log.Warn("a replica's host report does not parse; left out of the fleet view", zap.String("replica", p.Replica), zap.Error(err))
				continue
			}
			h.Replica, h.AgeSeconds, h.Self = p.Replica, p.Age.Seconds(), false
			v.Hosts = append(v.Hosts, h)
		}
	}
	keys, err := s.svc.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.AEAD != "" {
			v.PinnedKeys[k.AEAD]++
		} else {
			v.UnpinnedKeys++
		}
	}
	v.Finish()
	return v, nil
}

// handleSpeedFleet serves the fleet view: JSON, a text table in the
// layout of openssl speed's, or an HTML page.
func (s *Server) handleSpeedFleet(c *fiber.Ctx, q *call) error {
	format, err := speedview.Negotiate(c)
	if err != nil {
		return apiError(api.CodeBadRequest, err.Error())
	}
	v, err := s.fleetView(c.UserContext())
	if err != nil {
		if errors.Is(err, cryptosvc.ErrUnavailable) {
			return apiError(api.CodeKeystoreUnavailable, "the keystore holding the fleet's reports cannot be read")
		}
		return err
	}
	switch format {
	case speedview.FormatText, speedview.FormatMR:
		c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
		return v.WriteText(c, format == speedview.FormatMR)
	case speedview.FormatHTML:
		return speedview.ServeFleetPage(c, v)
	}
	return c.JSON(v)
}
