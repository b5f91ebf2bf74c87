package main

import (
	. "github.com/mmcloughlin/avo/operand"
)

// A stream is a list of instructions not yet emitted. Code that builds a
// stream instead of emitting directly can be emitted on its own (emit) or
// interleaved with another independent stream (merge), so that the
// out-of-order core overlaps two computations: the stitched kernels spread
// Poly1305's IFMA steps among ChaCha20's double rounds this way.
type stream []func()

// op appends inst(ops...).
func (s *stream) op(inst func(...Op), ops ...Op) {
	*s = append(*s, func() { inst(ops...) })
}

// bcast appends inst(x, ops...) for a register x, or its embedded-broadcast
// form instBcast(x, ops...) for a memory operand x.
func (s *stream) bcast(inst, instBcast func(...Op), x Op, ops ...Op) {
	if _, ok := x.(Mem); ok {
		inst = instBcast
	}
	s.op(inst, append([]Op{x}, ops...)...)
}

// emit emits s in order.
func (s stream) emit() {
	for _, f := range s {
		f()
	}
}

// merge emits a and b interleaved, b's instructions spread evenly among a's:
// after a's i-th instruction, as many of b's as make up the same fraction of
// b.
func merge(a, b stream) { mergeStreams(a, b).emit() }

// do appends f, which emits one or more instructions.
func (s *stream) do(f func()) { *s = append(*s, f) }

// mergeStreams returns a and b interleaved as merge emits them, so that a
// third stream can be merged with both.
func mergeStreams(a, b stream) stream {
	var s stream
	j := 0
	for i := range a {
		s = append(s, a[i])
		for ; j < len(b) && j*len(a) < (i+1)*len(b); j++ {
			s = append(s, b[j])
		}
	}
	return append(s, b[j:]...)
}

// op2 and op3 append inst(a, b) and inst(a, b, c), for the instructions
// whose operands avo fixes in number.
func (s *stream) op2(inst func(a, b Op), a, b Op) {
	*s = append(*s, func() { inst(a, b) })
}

func (s *stream) op3(inst func(a, b, c Op), a, b, c Op) {
	*s = append(*s, func() { inst(a, b, c) })
}
