// The tuning database: SQLite, one row per trial (TuningRecord.h), under a schema version.
//
// Databases are opened read-only (a system database, another machine's file to merge) or for
// writing (the user's). Many tuners may write one database at once: it runs in WAL mode, waits
// for locks, and each trial is its own transaction, so a crash loses at most the trial under
// way. A file that is not a SQLite database, is damaged, or has another schema version is
// reported by a DatabaseError naming the file and what to do, and is never modified.
#ifndef ATTNC_COMPILER_TUNING_TUNINGDATABASE_H
#define ATTNC_COMPILER_TUNING_TUNINGDATABASE_H

#include "Support/Errors.h"
#include "Tuning/TuningRecord.h"

#include <chrono>
#include <filesystem>
#include <optional>
#include <vector>

struct sqlite3;

namespace attnc::tuning {

constexpr int kSchemaVersion = 1;

class DatabaseError : public JobError {
public:
  using JobError::JobError;
};

class TuningDatabase {
public:
  enum class Mode { ReadOnly, ReadWrite };
  // ReadWrite creates the file (and its directory) when missing. Throws DatabaseError.
  TuningDatabase(const std::filesystem::path& path, Mode mode);
  ~TuningDatabase();
  TuningDatabase(const TuningDatabase&) = delete;
  TuningDatabase& operator=(const TuningDatabase&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Adds a trial; one with the same uid already there is kept as it is. True when added.
  bool insert(const TrialRecord& record);
  // Claims `item` (a trial about to be measured) for this process, so that another tune on the
  // same database waits for its record instead of measuring it again. False while another live
  // process holds it; a claim whose process is gone (this host, no such pid) or older than
  // `stale` is taken over. release() gives it up once the trial is recorded.
  bool claim(const std::string& item, std::chrono::seconds stale);
  void release(const std::string& item);
  // The trials of one spec, target and machine for one shape bucket, oldest first.
  std::vector<TrialRecord> trials(const TuningKey& key);
  // Every trial of one spec, target and machine, any shape bucket, oldest first.
  std::vector<TrialRecord> trialsFor(const std::string& specHash, const std::string& target,
                                     const std::string& hardware);
  std::vector<TrialRecord> all();

private:
  // Opens `name` (a path, or a URI with SQLITE_OPEN_URI) and checks or creates the schema.
  void open(const std::string& name, int flags);
  void exec(const char* sql);
  void execWaiting(const char* sql);
  // The meta table's schema_version; nullopt for a database without tables.
  std::optional<std::string> schemaVersion();
  void prepareSchema();
  // Whether the trials table has the build column (databases written before it have not).
  bool hasBuildColumn();
  std::vector<TrialRecord> select(const std::string& where, const std::vector<std::string>& args);
  [[noreturn]] void fail(const std::string& doing);

  std::filesystem::path path_;
  sqlite3* db_ = nullptr;
  int openError_ = 0; // SQLite's result code when open() failed
  Mode mode_;
  bool buildColumn_ = false;
};

// Where the user's database lives: $ATTNC_TUNING_DB, else $XDG_CACHE_HOME/attnc/tuning.db,
// else ~/.cache/attnc/tuning.db.
std::filesystem::path userDatabasePath();
// The system database under the overlay: $ATTNC_SYSTEM_TUNING_DB, else
// <prefix>/share/attnc/tuning.db beside this attnc (read only; absent is fine).
std::filesystem::path systemDatabasePath(const std::filesystem::path& executable);

} // namespace attnc::tuning

#endif // ATTNC_COMPILER_TUNING_TUNINGDATABASE_H
