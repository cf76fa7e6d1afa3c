package selection

import (
	"reflect"
	"testing"
)

func TestObjectMembers(t *testing.T) {
	type member struct{ key, value string }
	cases := []struct {
		name string
		raw  string
		want []member
	}{
		{name: "empty", raw: `{ }`},
		{name: "order and whitespace kept", raw: "{ \"b\" :\t1 ,\n\"a\":\"x\" }", want: []member{{"b", "1"}, {"a", `"x"`}}},
		{name: "escaped key decoded", raw: `{"na\u006de":"net-a","q\"k":null}`, want: []member{{"name", `"net-a"`}, {`q"k`, "null"}}},
		{name: "nested values whole", raw: `{"a":{"b":[1,{"c":"}]"}]},"d":[],"e":true}`,
			want: []member{{"a", `{"b":[1,{"c":"}]"}]}`}, {"d", "[]"}, {"e", "true"}}},
		{name: "string with escaped quote and backslash", raw: `{"a":"x\\\"y\\","b":-1.5e3}`, want: []member{{"a", `"x\\\"y\\"`}, {"b", "-1.5e3"}}},
		{name: "repeated keys all reported", raw: `{"a":1,"a":2}`, want: []member{{"a", "1"}, {"a", "2"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []member
			objectMembers([]byte(tc.raw), func(key, value []byte) {
				got = append(got, member{string(key), string(value)})
			})
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("objectMembers(%s) = %q, want %q", tc.raw, got, tc.want)
			}
		})
	}
}

func TestArrayElements(t *testing.T) {
	var got []string
	arrayElements([]byte(`[ 1, "a,]" ,{"x":[2]} , [ ] ,null]`), func(i int, value []byte) {
		if i != len(got) {
			t.Errorf("index %d, want %d", i, len(got))
		}
		got = append(got, string(value))
	})
	want := []string{"1", `"a,]"`, `{"x":[2]}`, "[ ]", "null"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("arrayElements = %q, want %q", got, want)
	}
}
