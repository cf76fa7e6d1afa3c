package attachments

import (
	"strconv"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/api/attachment"
)

// TestDoubtful: a record this hwnet wrote whole is trusted; one of a newer
// format, or with an attachment whose configuration list does not parse,
// is not, and the reason names the version or the network.
func TestDoubtful(t *testing.T) {
	good := attachment.Attachment{Network: "ns/a", IfName: "net1", ConfList: []byte(`{"cniVersion":"1.0.0","name":"a","plugins":[{"type":"x"}]}`)}
	noType := attachment.Attachment{Network: "ns/b", IfName: "net2", ConfList: []byte(`{"cniVersion":"1.0.0","name":"b","plugins":[{"type":""}]}`)}
	for _, tt := range []struct {
		name string
		rec  attachment.Record
		want string // "" trusted
	}{
		{"current", attachment.Record{Version: attachment.Version, Attachments: []attachment.Attachment{good}}, ""},
		{"unversioned", attachment.Record{Attachments: []attachment.Attachment{good}}, ""},
		{"newer", attachment.Record{Version: attachment.Version + 1, Attachments: []attachment.Attachment{good}}, "format version " + strconv.Itoa(attachment.Version+1)},
		{"empty plugin type", attachment.Record{Version: attachment.Version, Attachments: []attachment.Attachment{good, noType}}, "network ns/b interface net2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Doubtful(&tt.rec)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Doubtful: %v, want %q", err, tt.want)
			}
		})
	}
}
