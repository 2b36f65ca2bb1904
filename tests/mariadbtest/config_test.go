package mariadbtest

import (
	"strings"
	"testing"
)

func TestRenderConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     serverConfig
		want    []string
		notWant []string
	}{
		{
			name: "source",
			cfg:  serverConfig{opts: Options{Name: "source", Binlog: true, MaxBinlogSize: 1 << 20}, serverID: 7, dir: "/x", port: 4000, asRoot: true},
			want: []string{"[mariadbd]", "user=root", "port=4000", "bind-address=127.0.0.1", "skip-name-resolve",
				"datadir=/x/data", "socket=/x/mariadbd.sock", "log_bin=/x/mariadb-bin", "binlog_format=ROW",
				"binlog_row_image=FULL", "binlog_row_metadata=FULL", "log_slave_updates=ON", "binlog_checksum=CRC32",
				"expire_logs_days=0", "max_binlog_size=1048576", "server_id=7", "gtid_domain_id=0",
				"innodb_flush_log_at_trx_commit=1", "sync_binlog=1", "performance_schema=OFF",
				"character-set-server=utf8mb4", "collation-server=utf8mb4_general_ci", "max_connections=500",
				"max_allowed_packet=256M", "innodb_buffer_pool_size=64M"},
			notWant: []string{"skip-log-bin", "skip-networking"},
		},
		{
			name:    "fast target as another user",
			cfg:     serverConfig{opts: Options{Name: "target", FastCommit: true, GTIDDomainID: 3, ExtraConfig: []string{"lower_case_table_names=1"}}, serverID: 8, dir: "/y", port: 4001},
			want:    []string{"skip-log-bin", "innodb_flush_log_at_trx_commit=2", "sync_binlog=0", "gtid_domain_id=3", "lower_case_table_names=1"},
			notWant: []string{"user=root", "log_bin=", "max_binlog_size", "sync_binlog=1"},
		},
		{
			name:    "template without networking",
			cfg:     serverConfig{opts: Options{Name: "template"}, serverID: 1, dir: "/z"},
			want:    []string{"skip-networking"},
			notWant: []string{"port=", "bind-address"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines := strings.Split(tt.cfg.render(), "\n")
			has := func(prefix string) bool {
				for _, l := range lines {
					if strings.HasPrefix(l, prefix) {
						return true
					}
				}
				return false
			}
			for _, w := range tt.want {
				if !has(w) {
					t.Errorf("my.cnf lacks %q:\n%s", w, tt.cfg.render())
				}
			}
			for _, w := range tt.notWant {
				if has(w) {
					t.Errorf("my.cnf has %q:\n%s", w, tt.cfg.render())
				}
			}
			if lines[1] != "[mariadbd]" {
				t.Errorf("second line = %q, want the [mariadbd] section header", lines[1])
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "zero", opts: Options{}},
		{name: "binlog size", opts: Options{Binlog: true, MaxBinlogSize: 4096}},
		{name: "binlog size too small", opts: Options{Binlog: true, MaxBinlogSize: 100}, wantErr: "below"},
		{name: "binlog size without binlog", opts: Options{MaxBinlogSize: 1 << 20}, wantErr: "Binlog is off"},
		{name: "line break in extra config", opts: Options{ExtraConfig: []string{"a=1\nb=2"}}, wantErr: "line break"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("validate() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestDirLabel(t *testing.T) {
	tests := map[string]string{
		"":                          "mariadb",
		"source":                    "source",
		"a/b c":                     "a_b_c",
		"a-very-long-instance-name": "a-very-long-inst",
	}
	for in, want := range tests {
		if got := dirLabel(in); got != want {
			t.Errorf("dirLabel(%q) = %q, want %q", in, got, want)
		}
	}
}
