//go:build race

package cryptosvc

const underRace = true
