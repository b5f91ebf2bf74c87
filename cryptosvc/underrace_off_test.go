//go:build !race

package cryptosvc

const underRace = false
