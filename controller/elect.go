package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrLostLease says another replica holds the lease now; the process should
// exit, and its restart joins the election anew.
var ErrLostLease = errors.New("lost the leader lease")

// Election says which Lease the replicas compete for.
type Election struct {
	Namespace, Name, Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's; zero
	// means 15 s, 10 s and 2 s, kube-controller-manager's defaults.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// RunElected runs run while this replica holds the Lease, and returns when
// ctx ends (nil) or the lease is lost (ErrLostLease). Conditions and
// finalizers are functions of the cluster's state, so the next leader
// takes over without undoing anything.
func RunElected(ctx context.Context, client kubernetes.Interface, e Election, run func(context.Context) error) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.Identity},
	}
	started, runErr := make(chan struct{}), make(chan error, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cmp.Or(e.LeaseDuration, 15*time.Second),
		RenewDeadline:   cmp.Or(e.RenewDeadline, 10*time.Second),
		RetryPeriod:     cmp.Or(e.RetryPeriod, 2*time.Second),
		ReleaseOnCancel: true,
		Name:            e.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { close(started); runErr <- run(ctx) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(ctx)
	select {
	case <-started:
		// le.Run cancelled run's context on return; wait until it stops.
		if err := <-runErr; err != nil {
			return err
		}
	default:
	}
	if ctx.Err() != nil {
		return nil
	}
	return ErrLostLease
}
