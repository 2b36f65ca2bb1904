package rowimage

import (
	"reflect"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/shopspring/decimal"
)

func TestConvertValue(t *testing.T) {
	tests := []struct {
		name     string
		in       any
		typ      byte
		unsigned bool
		want     any
	}{
		{"nil", nil, mysql.MYSQL_TYPE_LONG, false, nil},
		{"tinyint unsigned", int8(-1), mysql.MYSQL_TYPE_TINY, true, uint64(255)},
		{"smallint unsigned", int16(-1), mysql.MYSQL_TYPE_SHORT, true, uint64(65535)},
		{"mediumint unsigned", int32(-1), mysql.MYSQL_TYPE_INT24, true, uint64(16777215)},
		{"int unsigned", int32(-1), mysql.MYSQL_TYPE_LONG, true, uint64(4294967295)},
		{"bigint unsigned", int64(-1), mysql.MYSQL_TYPE_LONGLONG, true, uint64(18446744073709551615)},
		{"signed stays", int32(-5), mysql.MYSQL_TYPE_LONG, false, int64(-5)},
		{"bit", int64(-1), mysql.MYSQL_TYPE_BIT, false, uint64(18446744073709551615)},
		{"decimal", decimal.RequireFromString("-12.3400"), mysql.MYSQL_TYPE_NEWDECIMAL, false, "-12.34"},
		{"string to bytes", "é", mysql.MYSQL_TYPE_VARCHAR, false, []byte("é")},
		{"float32 widened", float32(1.5), mysql.MYSQL_TYPE_FLOAT, false, float64(1.5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ConvertValue(tt.in, tt.typ, tt.unsigned); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ConvertValue(%#v) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}
