// Package kubeapi runs a real etcd and kube-apiserver for tests, so code
// that talks to Kubernetes is tested against the real API machinery
// (validation, resourceVersions, watches, CRDs) rather than a fake clientset.
//
// The binaries come from build-kube.sh beside this file, which caches them
// in /var/cache/hwnet-ci/kube/VERSION/bin, or in $HWNET_KUBE_CACHE when set
// (the directory holding the binaries itself).
//
// Authentication: Start generates a CA, a serving certificate for 127.0.0.1
// and an admin client certificate in group system:masters, which kube-apiserver
// authorizes for everything under --authorization-mode=RBAC. No
// kube-controller-manager runs, so the ServiceAccount admission plugin is
// disabled: pods can be created without a default service account.
package kubeapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// KubeVersion is the Kubernetes release build-kube.sh builds by default and
// Binaries looks for.
const KubeVersion = "v1.37.1"

// readyTimeout bounds the wait for etcd and kube-apiserver to serve; a cold
// kube-apiserver on a busy 2-core machine takes several seconds.
const readyTimeout = 90 * time.Second

// Server is an etcd and a kube-apiserver on free localhost ports, with
// their data, credentials and logs in a test's temporary directory.
type Server struct {
	dir       string
	binDir    string
	port      int
	etcdURL   string
	apiserver *process
	etcd      *process
	args      []string
	extraArgs []string
	config    *rest.Config
	client    kubernetes.Interface
	// baseline is the keys etcd held when kube-apiserver was first ready.
	baseline map[string]bool
	// stopped: Stop was called; the server is not reused.
	stopped bool
}

// Binaries returns the directory with kube-apiserver and etcd, or skips the
// test when they are absent, unless HWNET_REQUIRE_KUBE=1 or
// HWNET_REQUIRE_ROOT=1 is set, in which case it fails with the command that
// builds them.
func Binaries(t testing.TB) string {
	t.Helper()
	dir := binDir()
	var missing []string
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return dir
	}
	msg := fmt.Sprintf("kubeapi: %v not found in %s; build them with `make kube-bins` or `bash test/kubeapi/build-kube.sh %s %s`",
		missing, dir, KubeVersion, dir)
	if os.Getenv("HWNET_REQUIRE_KUBE") == "1" || os.Getenv("HWNET_REQUIRE_ROOT") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func binDir() string {
	if dir := os.Getenv("HWNET_KUBE_CACHE"); dir != "" {
		return dir
	}
	return filepath.Join("/var/cache/hwnet-ci/kube", KubeVersion, "bin")
}

// Start runs etcd and kube-apiserver, waits until /readyz answers ok and
// stops both when the test ends. On failure the tails of their logs are
// printed. extraArgs are added to kube-apiserver's command line (a
// --feature-gates of an older release's defaults, say).
//
// In a package whose TestMain is Main, the test may get a server an
// earlier test of the package used, with the same extraArgs: emptied of
// every object that test made but its CustomResourceDefinitions (pool.go).
func Start(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	if !idle.on() {
		s := launchRetrying(t, t.TempDir, extraArgs)
		t.Cleanup(func() {
			if t.Failed() {
				s.logTails(t)
			}
			if err := s.shutdown(); err != nil {
				t.Error(err)
			}
		})
		return s
	}
	s := idle.take(extraArgs)
	if s == nil {
		s = launchPooled(t, extraArgs)
	}
	t.Cleanup(func() {
		if t.Failed() {
			s.logTails(t)
		}
		if err := s.release(t); err != nil {
			t.Error(err)
		}
	})
	return s
}

// launchPooled launches servers that may outlive the test, in a directory
// of their own, and notes what a reset keeps.
func launchPooled(t testing.TB, extraArgs []string) *Server {
	t.Helper()
	s := launchRetrying(t, func() string {
		dir, err := os.MkdirTemp("", "kubeapi-")
		if err != nil {
			t.Fatal(err)
		}
		return dir
	}, extraArgs)
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := s.takeBaseline(ctx); err != nil {
		t.Fatal(errors.Join(err, s.discard()))
	}
	return s
}

// launchRetrying launches the servers in a directory dir makes, again in
// a new one while a port they were given was taken; it fails the test
// when they do not start.
func launchRetrying(t testing.TB, dir func() string, extraArgs []string) *Server {
	t.Helper()
	s, err := launch(Binaries(t), dir(), extraArgs...)
	// freePorts' ports are free when it looks, not certainly when etcd or
	// kube-apiserver binds them: another test may take one in between.
	for try := 1; try < launchTries && errors.Is(err, errPortTaken); try++ {
		if s != nil {
			_ = s.discard()
		}
		s, err = launch(Binaries(t), dir(), extraArgs...)
	}
	if err != nil {
		if s != nil {
			s.logTails(t)
			_ = s.discard()
		}
		t.Fatal(err)
	}
	return s
}

// launch starts the servers; on error the returned Server, if not nil,
// still owns processes that shutdown must stop.
func launch(binDir, dir string, extraArgs ...string) (*Server, error) {
	creds, err := writeCredentials(dir)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, binDir: binDir, port: ports[0], extraArgs: extraArgs}
	s.config = adminConfig(creds, s.port)
	if s.client, err = kubernetes.NewForConfig(s.config); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	s.etcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[1])
	if s.etcd, err = startProcess("etcd", filepath.Join(binDir, "etcd"), filepath.Join(dir, "etcd.log"),
		etcdArgs(dir, s.etcdURL, "http://127.0.0.1:"+strconv.Itoa(ports[2]))); err != nil {
		return nil, err
	}
	if err := waitEtcd(ctx, s.etcd, s.etcdURL); err != nil {
		return s, portTaken(err, s.etcd.logPath)
	}
	s.args = append(apiserverArgs(dir, creds, s.etcdURL, s.port), extraArgs...)
	return s, s.startAPIServer(ctx)
}

// takeBaseline notes the keys kube-apiserver made for itself by the time
// it is ready: what a reset keeps.
func (s *Server) takeBaseline(ctx context.Context) error {
	keys, err := s.etcdKeys(ctx)
	if err != nil {
		return err
	}
	s.baseline = make(map[string]bool, len(keys))
	for _, k := range keys {
		s.baseline[k] = true
	}
	return nil
}

func etcdArgs(dir, clientURL, peerURL string) []string {
	return []string{
		"--name=kubeapi",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=kubeapi=" + peerURL,
		// Tests do not need durability across a machine crash.
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
}

func apiserverArgs(dir string, creds *credentials, etcdURL string, port int) []string {
	return []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// Nothing in these tests reaches the API through the kubernetes
		// Service, and the reconciler refuses a loopback advertise address.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + dir,
		"--client-ca-file=" + creds.caFile,
		"--tls-cert-file=" + creds.servingCertFile,
		"--tls-private-key-file=" + creds.servingKeyFile,
		"--service-account-key-file=" + creds.serviceAccountKeyFile,
		"--service-account-signing-key-file=" + creds.serviceAccountKeyFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
	}
}

func adminConfig(creds *credentials, port int) *rest.Config {
	return &rest.Config{
		Host: "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   creds.caPEM,
			CertData: creds.adminCertPEM,
			KeyData:  creds.adminKeyPEM,
		},
		// Tests measure the server and the code under test, not client-go's
		// default client-side throttle of 5 requests a second.
		QPS:     -1,
		Timeout: 30 * time.Second,
	}
}

// freePorts returns n distinct ports the kernel just handed out on
// 127.0.0.1. Another process could take one before the servers bind it;
// that shows as a start failure naming the address.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Config returns a copy of the admin client configuration.
func (s *Server) Config() *rest.Config { return rest.CopyConfig(s.config) }

// Client returns a clientset with admin credentials.
func (s *Server) Client() kubernetes.Interface { return s.client }

// Dir is the temporary directory with the servers' data, credentials and
// logs (etcd.log, kube-apiserver.log).
func (s *Server) Dir() string { return s.dir }

// Stop stops kube-apiserver only, keeping etcd and its data, to simulate an
// API server outage. Requests fail until Restart.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if s.apiserver == nil {
		t.Fatal("kubeapi: Stop: kube-apiserver is not running")
	}
	s.stopped = true
	if err := s.apiserver.stop(); err != nil {
		t.Fatal(err)
	}
	s.apiserver = nil
}

// Restart starts kube-apiserver again on the same port and waits until it
// is ready.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.apiserver != nil {
		t.Fatal("kubeapi: Restart: kube-apiserver is still running; Stop it first")
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := s.startAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) startAPIServer(ctx context.Context) error {
	var err error
	s.apiserver, err = startProcess("kube-apiserver", filepath.Join(s.binDir, "kube-apiserver"),
		filepath.Join(s.dir, "kube-apiserver.log"), s.args)
	if err != nil {
		return err
	}
	return portTaken(s.waitReady(ctx), s.apiserver.logPath)
}

// launchTries bounds Start's attempts when a port it chose was taken.
const launchTries = 3

// errPortTaken marks a server that could not bind the port it was given.
var errPortTaken = errors.New("port taken before the server bound it")

// portTaken adds errPortTaken to err when the server's log says its port
// was in use.
func portTaken(err error, logPath string) error {
	if err == nil {
		return nil
	}
	if log, rerr := os.ReadFile(logPath); rerr == nil && bytes.Contains(log, []byte("address already in use")) {
		return fmt.Errorf("%w: %w", errPortTaken, err)
	}
	return err
}

// shutdown stops kube-apiserver, then etcd.
func (s *Server) shutdown() error {
	var errs []error
	for _, p := range []*process{s.apiserver, s.etcd} {
		if p != nil {
			errs = append(errs, p.stop())
		}
	}
	s.apiserver, s.etcd = nil, nil
	return errors.Join(errs...)
}
