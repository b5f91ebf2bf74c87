package server

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"sync"
	"unsafe"

	"github.com/cipherd/cipherd/api"
	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"
)

// localsKey is the type of the keys of cipherd's values in a request's
// locals: a small integer compares faster than a string, and no other
// package's key can equal one.
type localsKey uint8

const (
	localsRequest  localsKey = iota // *reqState
	localsIdentity                  // *identity
)

// reqState is what the middleware and the handlers of one request share: its
// ID, and the audit record of its one cryptographic operation, which goes
// out on the request's access line instead of a line of its own.
type reqState struct {
	id      string
	batch   bool         // the handler audits several items: each gets its own line
	audits  []byte       // the audit trail's records of the request, written when its handler returns
	audit   auditRecord  // the request's operation, to be logged on its access line; zero if none
	line    accessLine   // the access line, written when the request ends
	fields  [1]zap.Field // the line as the one field of its entry
	scratch *reqScratch  // taken on first use (scratchSpace)
	call    call         // the row serving the request, as serve hands it to the handler
	ctx     reqContext   // the handler's context, with the row's deadline
	idText  [24]byte     // a generated ID's text, which id points to
}

// newRequest starts a request's state: its ID, the caller's X-Request-Id
// when it is short and plain, or a new one, echoed on the response.
func newRequest(c *fiber.Ctx) *reqState {
	st := new(reqState)
	if id := c.Request().Header.Peek(api.HeaderRequestID); plainID(id) {
		st.id = string(id) // a copy: the header is in a buffer fasthttp reuses
	} else {
		// Its text lives in the state, which is never recycled: one
		// allocation for both.
		newRequestID(&st.idText)
		st.id = unsafe.String(&st.idText[0], len(st.idText))
	}
	c.Locals(localsRequest, st)
	c.Response().Header.SetCanonical(headerRequestID, unsafe.Slice(unsafe.StringData(st.id), len(st.id)))
	return st
}

// newRequestID writes a new request ID to dst: 96 random bits from the
// runtime's ChaCha8 generator (seeded by the OS), in hex. An ID needs to
// be unique, not secret, and crypto/rand cost a getrandom per request.
func newRequestID(dst *[24]byte) {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint32(b[8:], rand.Uint32())
	hex.Encode(dst[:], b[:])
}

// headerRequestID is api.HeaderRequestID as fasthttp normalizes it, so that
// setting it on a response skips that step.
var headerRequestID = []byte(api.HeaderRequestID)

// recycleScratch hands the request's scratch space back for the next
// request, unless a streamed response, written after the handlers return,
// may still read it.
func recycleScratch(c *fiber.Ctx, st *reqState) {
	if sc := st.scratch; sc != nil && !c.Response().IsBodyStream() {
		st.scratch = nil
		clear(sc.body[:sc.bodyUsed])
		clear(sc.data[:sc.dataUsed])
		sc.bodyUsed, sc.dataUsed = 0, 0
		scratches.Put(sc)
	}
}

// reqScratch is room for a small JSON body and the base64 data it carries,
// so that the commonest requests allocate neither. It holds request data:
// it is cleared before it is recycled. The request's state is not recycled
// itself: a logger's core may keep the access line it points to.
type reqScratch struct {
	body [1024]byte
	data [768]byte
	// How much of each may hold data: what recycling clears.
	bodyUsed, dataUsed int
}

var scratches = sync.Pool{New: func() any { return new(reqScratch) }}

// scratchSpace returns the request's scratch space.
func (st *reqState) scratchSpace() *reqScratch {
	if st.scratch == nil {
		st.scratch = scratches.Get().(*reqScratch)
	}
	return st.scratch
}

func plainID(id []byte) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		ch := id[i]
		if !('a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '-' || ch == '_' || ch == '.') {
			return false
		}
	}
	return true
}

// state returns the request's shared state; nil for a context that did not
// pass through the front middleware.
func state(c *fiber.Ctx) *reqState {
	st, _ := c.Locals(localsRequest).(*reqState)
	return st
}

func requestID(c *fiber.Ctx) string {
	if st := state(c); st != nil {
		return st.id
	}
	return ""
}
