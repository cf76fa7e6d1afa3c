// Package soakenv reads a randomized test's seed and step count from the
// environment, as `make soak` and `make soak-ledger` set them.
package soakenv

import (
	"os"
	"strconv"
	"testing"
)

// Params are the seed and step count the environment variables seedEnv
// and stepsEnv give, or seed and steps where they are unset.
func Params(t testing.TB, seedEnv, stepsEnv string, seed uint64, steps int) (uint64, int) {
	t.Helper()
	if v := os.Getenv(seedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, v, err)
		}
		seed = n
	}
	if v := os.Getenv(stepsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive count", stepsEnv, v)
		}
		steps = n
	}
	return seed, steps
}
