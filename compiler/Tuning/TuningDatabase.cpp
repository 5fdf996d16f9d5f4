#include "Tuning/TuningDatabase.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <sqlite3.h>
#include <thread>
#include <unistd.h>

namespace attnc::tuning {
namespace {

// The columns of a trial, in the order select() reads them, but the build, last.
constexpr const char* kColumns =
    "uid, spec_hash, spec, seq_q_lo, seq_q_hi, seq_k_lo, seq_k_hi, target, hardware, "
    "attnc_version, backend, toolchain, params, status, median_ms, p10_ms, p90_ms, runs, batch, "
    "seq_q, seq_k, threads, detail, seconds, created_at, seed, shard";

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trials(
  uid TEXT PRIMARY KEY,
  spec_hash TEXT NOT NULL, spec TEXT NOT NULL,
  seq_q_lo INTEGER NOT NULL, seq_q_hi INTEGER NOT NULL,
  seq_k_lo INTEGER NOT NULL, seq_k_hi INTEGER NOT NULL,
  target TEXT NOT NULL, hardware TEXT NOT NULL, attnc_version TEXT NOT NULL,
  backend TEXT NOT NULL, toolchain TEXT NOT NULL, params TEXT NOT NULL,
  status TEXT NOT NULL, median_ms REAL, p10_ms REAL, p90_ms REAL, runs INTEGER,
  batch INTEGER, seq_q INTEGER, seq_k INTEGER, threads INTEGER,
  detail TEXT, seconds REAL, created_at TEXT, seed INTEGER, shard TEXT);
CREATE INDEX IF NOT EXISTS trials_by_key ON trials(spec_hash, target, hardware, seq_q_lo, seq_k_lo);
)sql";

// The build that measured a trial (TrialRecord::build). Added to databases of this schema
// version when a writer opens them: older attnc versions leave it at ''.
constexpr const char* kBuildColumn =
    "ALTER TABLE trials ADD COLUMN build TEXT NOT NULL DEFAULT ''";

// Trials being measured, one row per claim (TuningDatabase::claim). Added to databases of this
// schema version when a writer opens them: older attnc versions ignore the table.
constexpr const char* kClaimsSchema = R"sql(
CREATE TABLE IF NOT EXISTS claims(item TEXT PRIMARY KEY, host TEXT NOT NULL,
                                  pid INTEGER NOT NULL, claimed_at INTEGER NOT NULL);
)sql";

std::string hostName() {
  char name[256] = "";
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

int64_t unixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Whether process `pid` of this host exists (EPERM: it does, as another user's).
bool processAlive(int64_t pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

// A prepared statement, finalized on scope exit.
class Statement {
public:
  Statement(sqlite3* db, const std::string& sql) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK)
      stmt_ = nullptr;
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  explicit operator bool() const { return stmt_ != nullptr; }
  sqlite3_stmt* get() const { return stmt_; }

  void bind(int i, const std::string& text) {
    sqlite3_bind_text(stmt_, i, text.c_str(), -1, SQLITE_TRANSIENT);
  }
  void bind(int i, int64_t value) { sqlite3_bind_int64(stmt_, i, value); }
  void bind(int i, double value) { sqlite3_bind_double(stmt_, i, value); }
  std::string text(int i) const {
    const unsigned char* t = sqlite3_column_text(stmt_, i);
    return t ? reinterpret_cast<const char*>(t) : "";
  }
  int64_t integer(int i) const { return sqlite3_column_int64(stmt_, i); }
  double real(int i) const { return sqlite3_column_double(stmt_, i); }

private:
  sqlite3_stmt* stmt_ = nullptr;
};

// `path` as an SQLite URI that opens it immutable: no lock, no -wal or -shm file, nothing
// written, so a database in a read-only directory (an installed system database) can be read.
std::string immutableUri(const std::filesystem::path& path) {
  std::string uri = "file:";
  for (unsigned char c : std::filesystem::absolute(path).string()) {
    if (c == '%' || c == '?' || c == '#' || c < 0x20 || c >= 0x7f) {
      char escaped[4];
      std::snprintf(escaped, sizeof(escaped), "%%%02X", c);
      uri += escaped;
    } else {
      uri += static_cast<char>(c);
    }
  }
  return uri + "?immutable=1";
}

} // namespace

TuningDatabase::TuningDatabase(const std::filesystem::path& path, Mode mode)
    : path_(path), mode_(mode) {
  if (mode == Mode::ReadOnly) {
    // A WAL database needs its -shm file even to be read; where that cannot be made (a
    // read-only directory), the file is read as immutable instead. Closing a database's last
    // connection checkpoints its WAL, so a database at rest is whole in its main file.
    try {
      open(path_.string(), SQLITE_OPEN_READONLY);
    } catch (const DatabaseError&) {
      if (openError_ != SQLITE_CANTOPEN && openError_ != SQLITE_READONLY)
        throw; // damaged, busy, of another schema: no reason to read it differently
      open(immutableUri(path_), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
    }
    return;
  }
  if (mode == Mode::ReadWrite && path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec)
      throw DatabaseError("tuning database " + path.string() + ": cannot create its directory (" +
                          ec.message() + ")");
  }
  open(path_.string(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
}

void TuningDatabase::open(const std::string& name, int flags) {
  try {
    if (sqlite3_open_v2(name.c_str(), &db_, flags, nullptr) != SQLITE_OK)
      fail("opening it");
    // Writers wait for each other rather than fail; a tune may hold the lock for one insert.
    sqlite3_busy_timeout(db_, 60000);
    prepareSchema();
  } catch (const DatabaseError&) {
    // A constructor that throws runs no destructor: the handle is closed here.
    openError_ = db_ ? sqlite3_errcode(db_) & 0xff : SQLITE_NOMEM; // the primary result code
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

TuningDatabase::~TuningDatabase() {
  sqlite3_close(db_);
}

void TuningDatabase::fail(const std::string& doing) {
  std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
  const int code = db_ ? sqlite3_errcode(db_) : SQLITE_NOMEM;
  std::string advice;
  if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT)
    advice = "; it was left untouched: move it away to start a new one, or merge what it still "
             "holds with attnc tune --merge";
  else if (code == SQLITE_READONLY || code == SQLITE_CANTOPEN || code == SQLITE_PERM)
    advice = "; check the path and its permissions, or choose another with --db or "
             "ATTNC_TUNING_DB";
  // A full disk, a failed read or write, no memory: the machine's failure, not the database's
  // (SQLite rolled the statement back; the file holds what it held).
  const int primary = code & 0xff; // an extended code's primary one
  if (primary == SQLITE_FULL || primary == SQLITE_IOERR || primary == SQLITE_NOMEM)
    throw EnvironmentError("tuning database " + path_.string() + ": " + doing + " failed: " +
                           why + "; it holds what it held before, and the same command "
                           "succeeds once the machine has room");
  throw DatabaseError("tuning database " + path_.string() + ": " + doing + " failed: " + why +
                      advice);
}

void TuningDatabase::exec(const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    std::string why = message ? message : sqlite3_errmsg(db_);
    sqlite3_free(message);
    fail(std::string("running ") + std::string(sql).substr(0, 40) + "... (" + why + ")");
  }
}

void TuningDatabase::execWaiting(const char* sql) {
  // Switching to WAL and the first schema writes can meet another process doing the same;
  // SQLite then reports "locked" without waiting, so wait here.
  for (int attempt = 0;; ++attempt) {
    const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK)
      return;
    if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || attempt == 1200)
      fail(std::string("running ") + sql);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::optional<std::string> TuningDatabase::schemaVersion() {
  Statement tables(db_, "SELECT count(*), sum(name = 'meta') FROM sqlite_master WHERE type = "
                        "'table'");
  if (!tables || sqlite3_step(tables.get()) != SQLITE_ROW)
    fail("reading its tables");
  if (tables.integer(1) == 0) {
    if (tables.integer(0) > 0)
      throw DatabaseError("tuning database " + path_.string() +
                          ": is a SQLite database of something else (it has tables but no attnc "
                          "schema version); it was left untouched");
    return std::nullopt; // empty: a new database
  }
  Statement version(db_, "SELECT value FROM meta WHERE key = 'schema_version'");
  if (!version)
    fail("reading its schema version");
  if (sqlite3_step(version.get()) != SQLITE_ROW)
    throw DatabaseError("tuning database " + path_.string() +
                        ": has no schema version; it is not an attnc tuning database, and was "
                        "left untouched");
  return version.text(0);
}

void TuningDatabase::prepareSchema() {
  // Reading the schema catches a file that is not a database before anything is written, and
  // a version this attnc does not know before anything is changed.
  std::optional<std::string> version = schemaVersion();
  if (version && *version != std::to_string(kSchemaVersion))
    throw DatabaseError("tuning database " + path_.string() + ": schema version " + *version +
                        ", but this attnc reads version " + std::to_string(kSchemaVersion) +
                        "; it was left untouched: use the attnc that wrote it, or point "
                        "ATTNC_TUNING_DB (or --db) at a new file");
  if (!version && mode_ == Mode::ReadOnly)
    throw DatabaseError("tuning database " + path_.string() + ": is empty");
  if (mode_ == Mode::ReadWrite && !version) {
    execWaiting("PRAGMA journal_mode=WAL");
    execWaiting("BEGIN IMMEDIATE");
    exec(kSchema);
    exec(("INSERT OR IGNORE INTO meta VALUES('schema_version', '" + std::to_string(kSchemaVersion) +
          "')")
             .c_str());
    exec("COMMIT");
  }
  buildColumn_ = hasBuildColumn();
  if (mode_ == Mode::ReadWrite && !buildColumn_) {
    execWaiting("BEGIN IMMEDIATE"); // one writer adds the column; the others find it added
    if (!hasBuildColumn())
      exec(kBuildColumn);
    exec("COMMIT");
    buildColumn_ = true;
  }
  if (mode_ == Mode::ReadWrite)
    execWaiting(kClaimsSchema);
}

bool TuningDatabase::hasBuildColumn() {
  Statement column(db_, "SELECT count(*) FROM pragma_table_info('trials') WHERE name = 'build'");
  if (!column || sqlite3_step(column.get()) != SQLITE_ROW)
    fail("reading the trials' columns");
  return column.integer(0) > 0;
}

bool TuningDatabase::claim(const std::string& item, std::chrono::seconds stale) {
  const std::string host = hostName();
  const int64_t pid = ::getpid(), now = unixSeconds();
  execWaiting("BEGIN IMMEDIATE");
  // A failure below must not leave the write lock held by an open transaction.
  struct RollbackUnlessDone {
    sqlite3* db;
    bool done = false;
    ~RollbackUnlessDone() {
      if (!done)
        sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    }
  } transaction{db_};
  Statement holder(db_, "SELECT host, pid, claimed_at FROM claims WHERE item = ?");
  if (!holder)
    fail("reading claims");
  holder.bind(1, item);
  if (sqlite3_step(holder.get()) == SQLITE_ROW) {
    const bool mine = holder.text(0) == host && holder.integer(1) == pid;
    const bool gone = holder.text(0) == host && !processAlive(holder.integer(1));
    const bool old = now - holder.integer(2) > stale.count();
    if (!mine && !gone && !old)
      return false; // rolled back by `transaction`
  }
  Statement take(db_, "INSERT OR REPLACE INTO claims VALUES(?, ?, ?, ?)");
  if (!take)
    fail("preparing a claim");
  take.bind(1, item);
  take.bind(2, host);
  take.bind(3, pid);
  take.bind(4, now);
  if (sqlite3_step(take.get()) != SQLITE_DONE)
    fail("claiming a trial");
  exec("COMMIT");
  transaction.done = true;
  return true;
}

void TuningDatabase::release(const std::string& item) {
  Statement drop(db_, "DELETE FROM claims WHERE item = ? AND host = ? AND pid = ?");
  if (!drop)
    fail("preparing a release");
  drop.bind(1, item);
  drop.bind(2, hostName());
  drop.bind(3, static_cast<int64_t>(::getpid()));
  if (sqlite3_step(drop.get()) != SQLITE_DONE)
    fail("releasing a claim");
}

bool TuningDatabase::insert(const TrialRecord& r) {
  Statement insert(db_, std::string("INSERT OR IGNORE INTO trials(") + kColumns +
                            ", build) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
                            "?)");
  if (!insert)
    fail("preparing an insert");
  int i = 0;
  insert.bind(++i, r.uid);
  insert.bind(++i, r.key.specHash);
  insert.bind(++i, r.key.spec);
  insert.bind(++i, r.key.bucket.seqQLo);
  insert.bind(++i, r.key.bucket.seqQHi);
  insert.bind(++i, r.key.bucket.seqKLo);
  insert.bind(++i, r.key.bucket.seqKHi);
  insert.bind(++i, r.key.target);
  insert.bind(++i, r.key.hardware);
  insert.bind(++i, r.key.attncVersion);
  insert.bind(++i, r.backend);
  insert.bind(++i, r.toolchain);
  insert.bind(++i, r.params.dump());
  insert.bind(++i, std::string(statusName(r.status)));
  insert.bind(++i, r.medianMs);
  insert.bind(++i, r.p10Ms);
  insert.bind(++i, r.p90Ms);
  insert.bind(++i, static_cast<int64_t>(r.runs));
  insert.bind(++i, r.batch);
  insert.bind(++i, r.seqQ);
  insert.bind(++i, r.seqK);
  insert.bind(++i, static_cast<int64_t>(r.threads));
  insert.bind(++i, r.detail);
  insert.bind(++i, r.seconds);
  insert.bind(++i, r.createdAt);
  insert.bind(++i, static_cast<int64_t>(r.seed));
  insert.bind(++i, r.shard);
  insert.bind(++i, r.build);
  if (sqlite3_step(insert.get()) != SQLITE_DONE)
    fail("adding a trial");
  return sqlite3_changes(db_) > 0;
}

std::vector<TrialRecord> TuningDatabase::select(const std::string& where,
                                                const std::vector<std::string>& args) {
  Statement query(db_, std::string("SELECT ") + kColumns + (buildColumn_ ? ", build" : ", ''") +
                           " FROM trials " + where + " ORDER BY created_at, rowid");
  if (!query)
    fail("reading trials");
  for (size_t i = 0; i < args.size(); ++i)
    query.bind(static_cast<int>(i + 1), args[i]);
  std::vector<TrialRecord> records;
  int step;
  while ((step = sqlite3_step(query.get())) == SQLITE_ROW) {
    TrialRecord r;
    int c = 0;
    r.uid = query.text(c++);
    r.key.specHash = query.text(c++);
    r.key.spec = query.text(c++);
    r.key.bucket.seqQLo = query.integer(c++);
    r.key.bucket.seqQHi = query.integer(c++);
    r.key.bucket.seqKLo = query.integer(c++);
    r.key.bucket.seqKHi = query.integer(c++);
    r.key.target = query.text(c++);
    r.key.hardware = query.text(c++);
    r.key.attncVersion = query.text(c++);
    r.backend = query.text(c++);
    r.toolchain = query.text(c++);
    const std::string params = query.text(c++);
    const std::string status = query.text(c++);
    try {
      r.params = nlohmann::json::parse(params);
      r.status = parseStatus(status);
    } catch (const std::exception& e) {
      throw DatabaseError("tuning database " + path_.string() + ": trial " + r.uid +
                          " is damaged (" + e.what() + ")");
    }
    r.medianMs = query.real(c++);
    r.p10Ms = query.real(c++);
    r.p90Ms = query.real(c++);
    r.runs = static_cast<int>(query.integer(c++));
    r.batch = query.integer(c++);
    r.seqQ = query.integer(c++);
    r.seqK = query.integer(c++);
    r.threads = static_cast<int>(query.integer(c++));
    r.detail = query.text(c++);
    r.seconds = query.real(c++);
    r.createdAt = query.text(c++);
    r.seed = static_cast<uint64_t>(query.integer(c++));
    r.shard = query.text(c++);
    r.build = query.text(c++);
    records.push_back(std::move(r));
  }
  if (step != SQLITE_DONE)
    fail("reading trials");
  return records;
}

std::vector<TrialRecord> TuningDatabase::trials(const TuningKey& key) {
  return select("WHERE spec_hash = ? AND target = ? AND hardware = ? AND attnc_version = ? AND "
                "seq_q_lo = ? AND seq_k_lo = ?",
                {key.specHash, key.target, key.hardware, key.attncVersion,
                 std::to_string(key.bucket.seqQLo), std::to_string(key.bucket.seqKLo)});
}

std::vector<TrialRecord> TuningDatabase::trialsFor(const std::string& specHash,
                                                   const std::string& target,
                                                   const std::string& hardware) {
  return select("WHERE spec_hash = ? AND target = ? AND hardware = ?",
                {specHash, target, hardware});
}

std::vector<TrialRecord> TuningDatabase::all() {
  return select("", {});
}

std::filesystem::path userDatabasePath() {
  if (const char* explicitPath = std::getenv("ATTNC_TUNING_DB"); explicitPath && *explicitPath)
    return explicitPath;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache)
    return std::filesystem::path(cache) / "attnc" / "tuning.db";
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home && *home ? home : ".") / ".cache" / "attnc" / "tuning.db";
}

std::filesystem::path systemDatabasePath(const std::filesystem::path& executable) {
  if (const char* explicitPath = std::getenv("ATTNC_SYSTEM_TUNING_DB"); explicitPath)
    return explicitPath;
  return executable.parent_path().parent_path() / "share" / "attnc" / "tuning.db";
}

} // namespace attnc::tuning
