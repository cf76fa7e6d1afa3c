package cache_test

import (
	"testing"

	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// TestMain lets a test reuse the API server an earlier one emptied.
func TestMain(m *testing.M) { kubeapi.Main(m) }
