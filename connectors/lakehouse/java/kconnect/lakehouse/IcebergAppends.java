package kconnect.lakehouse;

import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Stream;

import org.apache.iceberg.AppendFiles;
import org.apache.iceberg.SchemaParser;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.exceptions.NoSuchTableException;
import org.apache.iceberg.spark.SparkSchemaUtil;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DataFiles;
import org.apache.iceberg.Metrics;
import org.apache.iceberg.MetricsConfig;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.parquet.ParquetUtil;

/**
 * A commit round's Iceberg loads and appends, each in one call from Python: kconnect's Iceberg sink
 * (connectors/lakehouse/iceberg.py) reads every table of a round here at once ({@link #describeAll}),
 * writes each table's Parquet files (with the tables' field ids) into a directory of its own, then hands
 * every table of the round here at once to be appended ({@link #appendAll}).
 *
 * <p>Why: through py4j each table's load was about fifteen gateway round trips and its append about forty
 * (the data file's builder, its metrics, the commit, the new snapshot read back): for a trickle's round of
 * 50 tables ~1 s and ~2.5 s on a 2-core machine, most of it Python threads taking turns on the GIL. Here
 * the same steps run in the JVM, up to {@code threads} tables at once; tables are named, and answered,
 * in text (a py4j list argument costs a round trip per element), and a table the round's description
 * loaded is appended through that load.
 *
 * <p>Each table gets exactly the commit the Python path makes: its files moved into the table's data
 * location (a local file system: the caller checks), their metrics read from their footers under the
 * table's metrics config, one {@code AppendFiles} whose snapshot summary carries {@code key} = the table's
 * Kafka offsets text. A table with no files gets a snapshot with no files that carries the offsets. One
 * table's failure does not stop the others; it is reported in its line.
 */
public final class IcebergAppends {
  private IcebergAppends() {}

  /**
   * The tables {@link #describeAll} loaded, by catalog and name, taken by the round's {@link #appendAll}
   * so that it does not load each table from the catalog again. A table changed since (created, evolved,
   * committed to by another writer) is still appended correctly: Iceberg's commit finds its metadata stale,
   * refreshes and retries, as it does for any concurrent commit.
   */
  private static final Map<String, Table> LOADED = new ConcurrentHashMap<>();

  /** At most this many tables are held (a round's tables not appended, e.g. upserts, are left behind). */
  private static final int LOADED_MAX = 10_000;

  private static String loadedKey(Catalog catalog, String name) {
    return System.identityHashCode(catalog) + "/" + name;
  }

  /** The version of this helper's contract with the Python side; the sink checks it before use. */
  public static int version() {
    return 2;
  }

  /**
   * Loads each table of {@code names} (a line per table, its name's parts separated by U+001F) from the
   * Iceberg {@code catalog}.
   *
   * @return a line per table, in order: {@code missing}, {@code error<TAB>class: message}, or {@code
   *     found<TAB>current snapshot id or -<TAB>1 if unpartitioned else 0<TAB>location<TAB>Spark schema
   *     JSON<TAB>Iceberg schema JSON}
   */
  public static String describeAll(Object catalog, String names, int threads) throws InterruptedException {
    Catalog iceberg = (Catalog) catalog;
    List<String> lines = lines(names);
    if (LOADED.size() > LOADED_MAX) {
      LOADED.clear();
    }
    return each(lines.size(), threads, i -> describeOne(iceberg, lines.get(i)));
  }

  /**
   * Appends each table's files and commits it: {@code names} (as {@link #describeAll}), {@code dirs}
   * (local directories holding each table's {@code *.parquet} files; missing: no files) and {@code values}
   * are a line per table. Each table is loaded anew from the catalog for its commit.
   *
   * @return one line per table, in order: {@code ok<TAB>snapshot id<TAB>parent id or -<TAB>1 if the new
   *     current snapshot's summary carries the value, else 0}, or {@code error<TAB>class: message}
   */
  public static String appendAll(
      Object catalog, String names, String dirs, String key, String values, int threads)
      throws InterruptedException {
    Catalog iceberg = (Catalog) catalog;
    List<String> tables = lines(names);
    List<String> dirList = lines(dirs);
    List<String> valueList = lines(values);
    int n = tables.size();
    if (dirList.size() != n || valueList.size() != n) {
      throw new IllegalArgumentException(
          "names, dirs and values must be as many lines: " + n + ", " + dirList.size() + ", "
              + valueList.size());
    }
    return each(
        n, threads, i -> appendOne(loaded(iceberg, tables.get(i)), dirList.get(i), key, valueList.get(i)));
  }

  private interface Step {
    String run(int index) throws Exception;
  }

  /** {@code step} of 0..n-1, up to {@code threads} at once: their lines, in order. */
  private static String each(int n, int threads, Step step) throws InterruptedException {
    if (n == 0) {
      return "";
    }
    ExecutorService pool = Executors.newFixedThreadPool(Math.max(1, Math.min(threads, n)), r -> {
      Thread t = new Thread(r, "kconnect-iceberg-round");
      t.setDaemon(true);
      return t;
    });
    try {
      List<Future<String>> futures = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        int index = i;
        futures.add(pool.submit(() -> {
          try {
            return step.run(index);
          } catch (Exception | LinkageError e) {
            return error(e);
          }
        }));
      }
      StringBuilder out = new StringBuilder();
      for (Future<String> future : futures) {
        String line;
        try {
          line = future.get();
        } catch (java.util.concurrent.ExecutionException e) {
          line = error(e.getCause() == null ? e : e.getCause());
        }
        out.append(line).append('\n');
      }
      return out.toString();
    } finally {
      pool.shutdownNow();
    }
  }

  private static List<String> lines(String text) {
    List<String> out = new ArrayList<>();
    if (text.isEmpty()) {
      return out;
    }
    for (String line : text.split("\n", -1)) {
      out.add(line);
    }
    if (!out.isEmpty() && out.get(out.size() - 1).isEmpty()) {
      out.remove(out.size() - 1);
    }
    return out;
  }

  private static Table load(Catalog catalog, String name) {
    String[] parts = name.split("\u001f", -1);
    String[] namespace = java.util.Arrays.copyOf(parts, parts.length - 1);
    return catalog.loadTable(TableIdentifier.of(Namespace.of(namespace), parts[parts.length - 1]));
  }

  /** The table as this round's {@link #describeAll} loaded it, else loaded now. */
  private static Table loaded(Catalog catalog, String name) {
    Table held = LOADED.remove(loadedKey(catalog, name));
    return held != null ? held : load(catalog, name);
  }

  private static String describeOne(Catalog catalog, String name) {
    Table table;
    try {
      table = load(catalog, name);
    } catch (NoSuchTableException e) {
      return "missing";
    }
    LOADED.put(loadedKey(catalog, name), table);
    Snapshot snapshot = table.currentSnapshot();
    return "found\t" + (snapshot == null ? "-" : Long.toString(snapshot.snapshotId())) + "\t"
        + (table.spec().isUnpartitioned() ? "1" : "0") + "\t" + clean(table.location()) + "\t"
        + clean(SparkSchemaUtil.convert(table.schema()).json()) + "\t"
        + clean(SchemaParser.toJson(table.schema()));
  }

  private static String clean(String text) {
    return text.replace('\n', ' ').replace('\t', ' ');
  }

  private static String appendOne(Table table, String dir, String key, String value) throws IOException {
    MetricsConfig metricsConfig = MetricsConfig.forTable(table);
    AppendFiles append = table.newAppend();
    for (Path file : parquetFiles(dir)) {
      String location = table.locationProvider().newDataLocation(file.getFileName().toString());
      Path target = localPath(location);
      Files.createDirectories(target.getParent());
      long size = Files.size(file);
      Files.move(file, target); // another file system: copied, then removed
      Metrics metrics = ParquetUtil.fileMetrics(table.io().newInputFile(location), metricsConfig);
      DataFile dataFile =
          DataFiles.builder(table.spec())
              .withPath(location)
              .withFileSizeInBytes(size)
              .withFormat("PARQUET")
              .withMetrics(metrics)
              .build();
      append.appendFile(dataFile);
    }
    append.set(key, value);
    append.commit();
    Snapshot snapshot = table.currentSnapshot();
    if (snapshot == null) {
      return "ok\t-1\t-\t0";
    }
    Long parent = snapshot.parentId();
    boolean carries = value.equals(snapshot.summary().get(key));
    return "ok\t" + snapshot.snapshotId() + "\t" + (parent == null ? "-" : parent.toString()) + "\t"
        + (carries ? "1" : "0");
  }

  private static List<Path> parquetFiles(String dir) throws IOException {
    List<Path> files = new ArrayList<>();
    if (dir == null || dir.isEmpty()) {
      return files;
    }
    Path path = Paths.get(dir);
    if (!Files.isDirectory(path)) {
      return files;
    }
    try (Stream<Path> listing = Files.list(path)) {
      listing.filter(p -> p.getFileName().toString().endsWith(".parquet")).sorted().forEach(files::add);
    }
    return files;
  }

  /** A file's path on this machine from an Iceberg location ({@code file:/x}, {@code file:///x}, {@code /x}). */
  private static Path localPath(String location) {
    if (location.startsWith("file:")) {
      return Paths.get(URI.create(location).getPath());
    }
    return Paths.get(location);
  }

  private static String error(Throwable e) {
    String message = String.valueOf(e.getMessage()).replace('\n', ' ').replace('\t', ' ');
    return "error\t" + e.getClass().getName() + ": " + message;
  }
}
