// Golden bytes of the KIP-848 seed's group records, written by Apache Kafka's own serialization library.
//
//   java -cp "$CLASSPATH:." GoldenGroupRecords golden    prints "name hex" lines (see regenerate.sh)
//   java -cp "$CLASSPATH:." GoldenGroupRecords decode    reads "key HEX" / "value <type> HEX" lines on
//                                                        stdin and answers each with
//                                                        "OK <hex re-encoded by Java>" or
//                                                        "ERR <exception>"
//
// The seed's schemas (with kconnect's resolution of its broken ConnectorsTasks and TargetAssignment
// nesting, see runtime/group/group_records.py) are described with kafka-clients'
// org.apache.kafka.common.protocol.types, the schema classes Kafka's generated messages are checked
// against. A record is written the way Kafka writes its coordinator records to __consumer_offsets: an INT16
// version, then the key with the classic encoding (flexibleVersions "none") or the value with the
// flexible one (compact strings, bytes and arrays, a tagged-fields section closing every struct).
// Connect's worker metadata and assignments inside the records come from Connect's own serializers.
// This file only calls Kafka's public classes; it contains no Kafka code.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.NavigableMap;
import java.util.TreeMap;

import org.apache.kafka.common.protocol.types.CompactArrayOf;
import org.apache.kafka.common.protocol.types.Field;
import org.apache.kafka.common.protocol.types.RawTaggedField;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.Struct;
import org.apache.kafka.common.protocol.types.Type;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.connect.runtime.distributed.ExtendedAssignment;
import org.apache.kafka.connect.runtime.distributed.ExtendedWorkerState;
import org.apache.kafka.connect.runtime.distributed.IncrementalCooperativeConnectProtocol;
import org.apache.kafka.connect.util.ConnectorTaskId;

public class GoldenGroupRecords {
    // ---- keys (classic encoding) -------------------------------------------------------------------
    static final Schema GROUP_KEY = new Schema(new Field("group_id", Type.STRING));
    static final Schema MEMBER_KEY = new Schema(new Field("group_id", Type.STRING), new Field("member_id", Type.STRING));

    // ---- values (flexible encoding) ----------------------------------------------------------------
    static Field tags() {
        return Field.TaggedFieldsSection.of();
    }

    static final Schema TASK_ENTRY = new Schema(
            new Field("connector", Type.COMPACT_STRING),
            new Field("task_ids", new CompactArrayOf(Type.INT32)),
            tags());
    static final Schema CONNECTORS_TASKS = new Schema(
            new Field("connectors", new CompactArrayOf(Type.COMPACT_STRING)),
            new Field("tasks", new CompactArrayOf(TASK_ENTRY)),
            tags());
    static final Schema GROUP_METADATA = new Schema(new Field("epoch", Type.INT32), tags());
    static final Schema CONNECTORS_TASKS_METADATA = new Schema(
            new Field("epoch", Type.INT32),
            new Field("connectors_tasks", new CompactArrayOf(CONNECTORS_TASKS)),
            tags());
    static final Schema ASSIGNOR = new Schema(
            new Field("name", Type.COMPACT_STRING),
            new Field("minimum_version", Type.INT16),
            new Field("maximum_version", Type.INT16),
            new Field("reason", Type.INT8),
            new Field("version", Type.INT16),
            new Field("metadata", Type.COMPACT_BYTES),
            tags());
    static final Schema MEMBER_METADATA = new Schema(
            new Field("group_epoch", Type.INT32),
            new Field("instance_id", Type.COMPACT_STRING),
            new Field("client_id", Type.COMPACT_STRING),
            new Field("client_host", Type.COMPACT_STRING),
            new Field("subscribed_topic_names", new CompactArrayOf(Type.COMPACT_STRING)),
            new Field("subscribed_topic_regex", Type.COMPACT_STRING),
            new Field("assignors", new CompactArrayOf(ASSIGNOR)),
            tags());
    static final Schema TARGET_MEMBER = new Schema(
            new Field("member_id", Type.COMPACT_STRING),
            new Field("error", Type.INT8),
            new Field("connectors_tasks", new CompactArrayOf(CONNECTORS_TASKS)),
            new Field("version", Type.INT16),
            new Field("metadata", Type.COMPACT_BYTES),
            tags());
    static final Schema TARGET_ASSIGNMENT = new Schema(
            new Field("assignment_epoch", Type.INT32),
            new Field("members", new CompactArrayOf(TARGET_MEMBER)),
            tags());
    static final Schema CURRENT_MEMBER_ASSIGNMENT = new Schema(
            new Field("member_epoch", Type.INT32),
            new Field("error", Type.INT8),
            new Field("connectors_tasks", new CompactArrayOf(CONNECTORS_TASKS)),
            new Field("version", Type.INT16),
            new Field("metadata", Type.COMPACT_BYTES),
            tags());
    static final Schema CONFIGURATION = new Schema(
            new Field("name", Type.COMPACT_STRING),
            new Field("value", Type.COMPACT_STRING),
            tags());
    static final Schema GROUP_CONFIGURATION = new Schema(
            new Field("configurations", new CompactArrayOf(CONFIGURATION)),
            tags());

    static Schema keySchema(int version) {
        switch (version) {
            case 3: case 4: case 6: case 8: return GROUP_KEY;
            case 5: case 7: return MEMBER_KEY;
            default: throw new IllegalArgumentException("unknown key version " + version);
        }
    }

    static Schema valueSchema(int type) {
        switch (type) {
            case 3: return GROUP_METADATA;
            case 4: return CONNECTORS_TASKS_METADATA;
            case 5: return MEMBER_METADATA;
            case 6: return TARGET_ASSIGNMENT;
            case 7: return CURRENT_MEMBER_ASSIGNMENT;
            case 8: return GROUP_CONFIGURATION;
            default: throw new IllegalArgumentException("unknown record type " + type);
        }
    }

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "golden";
        if (mode.equals("golden")) {
            golden();
        } else if (mode.equals("decode")) {
            decode();
        } else {
            System.err.println("usage: GoldenGroupRecords golden|decode");
            System.exit(2);
        }
    }

    // ---- building structs --------------------------------------------------------------------------

    static Struct struct(Schema schema) {
        Struct s = new Struct(schema);
        s.set("_tagged_fields", new TreeMap<Integer, Object>());
        return s;
    }

    static Struct withRawTags(Struct s, int... tagsAndSizes) {
        NavigableMap<Integer, Object> raw = new TreeMap<>();
        for (int i = 0; i < tagsAndSizes.length; i += 2) {
            byte[] data = new byte[tagsAndSizes[i + 1]];
            Arrays.fill(data, (byte) 0x5a);
            raw.put(tagsAndSizes[i], new RawTaggedField(tagsAndSizes[i], data));
        }
        s.set("_tagged_fields", raw);
        return s;
    }

    /** One ConnectorsTasks element: connectors, then {connector, task ids} entries. */
    static Struct ct(String[] connectors, Object[][] tasks) {
        Struct s = struct(CONNECTORS_TASKS);
        s.set("connectors", connectors);
        Object[] entries = new Object[tasks.length];
        for (int i = 0; i < tasks.length; i++) {
            Struct e = struct(TASK_ENTRY);
            e.set("connector", tasks[i][0]);
            e.set("task_ids", Arrays.copyOfRange(tasks[i], 1, tasks[i].length));
            entries[i] = e;
        }
        s.set("tasks", entries);
        return s;
    }

    static Object[] task(String connector, Integer... ids) {
        Object[] out = new Object[ids.length + 1];
        out[0] = connector;
        System.arraycopy(ids, 0, out, 1, ids.length);
        return out;
    }

    static String[] strings(String... s) {
        return s;
    }

    static Object[][] tasks(Object[]... entries) {
        return entries;
    }

    static byte[] key(int version, String groupId, String memberId) {
        Struct s = new Struct(keySchema(version));
        s.set("group_id", groupId);
        if (memberId != null) s.set("member_id", memberId);
        ByteBuffer buf = ByteBuffer.allocate(2 + s.sizeOf());
        buf.putShort((short) version);
        s.writeTo(buf);
        return buf.array();
    }

    static byte[] value(Struct s) {
        ByteBuffer buf = ByteBuffer.allocate(2 + s.sizeOf());
        buf.putShort((short) 0);
        s.writeTo(buf);
        return buf.array();
    }

    static byte[] workerMetadata(String url, long offset, ExtendedAssignment allocation) {
        return toArray(IncrementalCooperativeConnectProtocol.serializeMetadata(
                new ExtendedWorkerState(url, offset, allocation), true));
    }

    static byte[] assignment(String leader, String leaderUrl, long offset, List<String> connectors,
                             List<ConnectorTaskId> tasks, List<String> revokedConnectors,
                             List<ConnectorTaskId> revokedTasks, int delay) {
        return toArray(IncrementalCooperativeConnectProtocol.serializeAssignment(new ExtendedAssignment(
                (short) 2, (short) 0, leader, leaderUrl, offset, connectors, tasks, revokedConnectors,
                revokedTasks, delay), true));
    }

    static byte[] toArray(ByteBuffer b) {
        byte[] out = new byte[b.remaining()];
        b.duplicate().get(out);
        return out;
    }

    static List<ConnectorTaskId> taskIds(String connector, int... ids) {
        List<ConnectorTaskId> out = new ArrayList<>();
        for (int id : ids) out.add(new ConnectorTaskId(connector, id));
        return out;
    }

    // ---- golden mode -------------------------------------------------------------------------------

    static void emit(String name, byte[] bytes) {
        StringBuilder sb = new StringBuilder(name).append(' ');
        for (byte b : bytes) sb.append(String.format("%02x", b & 0xff));
        System.out.println(sb);
    }

    static String hex(byte[] bytes) {
        StringBuilder sb = new StringBuilder();
        for (byte b : bytes) sb.append(String.format("%02x", b & 0xff));
        return sb.toString();
    }

    static void golden() {
        String g = "connect-cluster";
        emit("key_group_metadata", key(3, g, null));
        emit("key_connectors_tasks", key(4, g, null));
        emit("key_member_metadata", key(5, g, "worker-1-4f2a"));
        emit("key_target_assignment", key(6, g, null));
        emit("key_current_member_assignment", key(7, g, "worker-1-4f2a"));
        emit("key_group_configuration", key(8, g, null));
        emit("key_unicode", key(5, "gr\u00fcppe-\u2603", "m\u00e9mber-\uD83D\uDCA1"));
        emit("key_empty_strings", key(7, "", ""));

        Struct gm = struct(GROUP_METADATA);
        gm.set("epoch", 42);
        emit("value_group_metadata", value(gm));
        Struct gmNeg = struct(GROUP_METADATA);
        gmNeg.set("epoch", Integer.MIN_VALUE);
        emit("value_group_metadata_min_epoch", value(gmNeg));

        Struct ctm = struct(CONNECTORS_TASKS_METADATA);
        ctm.set("epoch", 7);
        ctm.set("connectors_tasks", new Object[] {
            ct(strings("sink-a", "source-b"), tasks(task("sink-a", 0, 1, 2), task("source-b", 0)))});
        emit("value_connectors_tasks", value(ctm));
        Struct ctmEmpty = struct(CONNECTORS_TASKS_METADATA);
        ctmEmpty.set("epoch", 0);
        ctmEmpty.set("connectors_tasks", new Object[] {ct(strings(), tasks())});
        emit("value_connectors_tasks_empty", value(ctmEmpty));
        // Two elements: readers take the union (writers emit one).
        Struct ctmSplit = struct(CONNECTORS_TASKS_METADATA);
        ctmSplit.set("epoch", 8);
        ctmSplit.set("connectors_tasks", new Object[] {
            ct(strings("a"), tasks(task("a", 0))), ct(strings("b"), tasks(task("a", 1), task("b", 0)))});
        emit("value_connectors_tasks_two_elements", value(ctmSplit));

        ExtendedAssignment owned = new ExtendedAssignment((short) 2, (short) 0, "worker-1-4f2a", "http://w1:8083/", 12L,
                List.of("sink-a"), taskIds("sink-a", 0, 1), List.of(), List.of(), 0);
        Struct assignor = struct(ASSIGNOR);
        assignor.set("name", "sessioned");
        assignor.set("minimum_version", (short) 0);
        assignor.set("maximum_version", (short) 2);
        assignor.set("reason", (byte) 0);
        assignor.set("version", (short) 2);
        assignor.set("metadata", ByteBuffer.wrap(workerMetadata("http://w1:8083/", 12L, owned)));
        Struct assignor2 = struct(ASSIGNOR);
        assignor2.set("name", "default");
        assignor2.set("minimum_version", (short) 0);
        assignor2.set("maximum_version", (short) 0);
        assignor2.set("reason", (byte) -1);
        assignor2.set("version", (short) 0);
        assignor2.set("metadata", ByteBuffer.wrap(new byte[0]));
        Struct mm = struct(MEMBER_METADATA);
        mm.set("group_epoch", 42);
        mm.set("instance_id", "w1");
        mm.set("client_id", "connect-1");
        mm.set("client_host", "/10.0.0.1");
        mm.set("subscribed_topic_names", strings("connect-configs", "connect-status"));
        mm.set("subscribed_topic_regex", "");
        mm.set("assignors", new Object[] {assignor, assignor2});
        emit("value_member_metadata", value(mm));
        Struct mmBare = struct(MEMBER_METADATA);
        mmBare.set("group_epoch", -1);
        mmBare.set("instance_id", "");
        mmBare.set("client_id", "");
        mmBare.set("client_host", "");
        mmBare.set("subscribed_topic_names", strings());
        mmBare.set("subscribed_topic_regex", "connect-.*");
        mmBare.set("assignors", new Object[0]);
        emit("value_member_metadata_bare", value(mmBare));

        Struct tm1 = struct(TARGET_MEMBER);
        tm1.set("member_id", "worker-1-4f2a");
        tm1.set("error", (byte) 0);
        tm1.set("connectors_tasks", new Object[] {ct(strings("sink-a"), tasks(task("sink-a", 0, 1)))});
        tm1.set("version", (short) 2);
        tm1.set("metadata", ByteBuffer.wrap(assignment("worker-1-4f2a", "http://w1:8083/", 12L,
                List.of("sink-a"), taskIds("sink-a", 0, 1), List.of(), List.of(), 0)));
        Struct tm2 = struct(TARGET_MEMBER);
        tm2.set("member_id", "worker-2-9c1d");
        tm2.set("error", (byte) 1);
        tm2.set("connectors_tasks", new Object[] {ct(strings(), tasks(task("source-b", 0)))});
        tm2.set("version", (short) 2);
        tm2.set("metadata", ByteBuffer.wrap(assignment("worker-1-4f2a", "http://w1:8083/", 12L,
                List.of(), List.of(), List.of("sink-a"), taskIds("sink-a", 2), 30000)));
        Struct ta = struct(TARGET_ASSIGNMENT);
        ta.set("assignment_epoch", 43);
        ta.set("members", new Object[] {tm1, tm2});
        emit("value_target_assignment", value(ta));
        Struct taEmpty = struct(TARGET_ASSIGNMENT);
        taEmpty.set("assignment_epoch", 0);
        taEmpty.set("members", new Object[0]);
        emit("value_target_assignment_empty", value(taEmpty));

        Struct cma = struct(CURRENT_MEMBER_ASSIGNMENT);
        cma.set("member_epoch", 43);
        cma.set("error", (byte) 0);
        cma.set("connectors_tasks", new Object[] {
            ct(strings("sink-a"), tasks(task("sink-a", 0, 1), task("source-b", Integer.MAX_VALUE)))});
        cma.set("version", (short) 2);
        cma.set("metadata", ByteBuffer.wrap(new byte[] {1, 2, 3}));
        emit("value_current_member_assignment", value(cma));

        Struct c1 = struct(CONFIGURATION);
        c1.set("name", "scheduled.rebalance.max.delay.ms");
        c1.set("value", "300000");
        Struct c2 = struct(CONFIGURATION);
        c2.set("name", "session.timeout.ms");
        c2.set("value", "10000");
        Struct gc = struct(GROUP_CONFIGURATION);
        gc.set("configurations", new Object[] {c1, c2});
        emit("value_group_configuration", value(gc));

        // A long string: its compact length needs a two-byte varint.
        Struct cLong = struct(CONFIGURATION);
        cLong.set("name", "long");
        cLong.set("value", "x".repeat(300));
        Struct gcLong = struct(GROUP_CONFIGURATION);
        gcLong.set("configurations", new Object[] {cLong});
        emit("value_group_configuration_long", value(gcLong));

        // Unknown tagged fields (a later revision's) at the top level and inside array elements: readers
        // must skip them.
        Struct cTagged = withRawTags(struct(CONFIGURATION), 0, 3, 7, 200);
        cTagged.set("name", "k");
        cTagged.set("value", "v");
        Struct gcTagged = withRawTags(struct(GROUP_CONFIGURATION), 1, 0, 300, 2);
        gcTagged.set("configurations", new Object[] {cTagged});
        emit("tagged_group_configuration", value(gcTagged));
        Struct ctTagged = withRawTags(ct(strings("a"), tasks(task("a", 0))), 5, 4);
        Struct ctmTagged = withRawTags(struct(CONNECTORS_TASKS_METADATA), 2, 1);
        ctmTagged.set("epoch", 9);
        ctmTagged.set("connectors_tasks", new Object[] {ctTagged});
        emit("tagged_connectors_tasks", value(ctmTagged));

        // Coordinator placement: Utils.abs(groupId.hashCode()) % partitions ("-" stands for the empty id).
        String[] groups = {"connect-cluster", "g", "", "gr\u00fcppe-\u2603", "\uD83D\uDCA1-group",
            "polygenelubricants" /* hashCode() == Integer.MIN_VALUE */, "a-much-longer-group-id-for-kconnect-42"};
        int[] counts = {1, 3, 25, 50};
        for (String group : groups) {
            for (int n : counts) {
                String h = group.isEmpty() ? "-" : hex(group.getBytes(StandardCharsets.UTF_8));
                System.out.println("partition_for " + h + " " + n + " "
                        + (Utils.abs(group.hashCode()) % n));
            }
        }
    }

    // ---- decode mode -------------------------------------------------------------------------------

    static byte[] unhex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    static void decode() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            String[] parts = line.trim().split(" ");
            try {
                ByteBuffer buf;
                Schema schema;
                if (parts[0].equals("key")) {
                    buf = ByteBuffer.wrap(unhex(parts[1]));
                    schema = keySchema(buf.getShort());
                } else {
                    buf = ByteBuffer.wrap(unhex(parts[2]));
                    short version = buf.getShort();
                    if (version != 0) throw new IllegalArgumentException("unknown value version " + version);
                    schema = valueSchema(Integer.parseInt(parts[1]));
                }
                int start = buf.position();
                Struct s = schema.read(buf);
                if (buf.hasRemaining()) throw new IllegalArgumentException(buf.remaining() + " trailing bytes");
                ByteBuffer out = ByteBuffer.allocate(start + s.sizeOf());
                out.put(buf.array(), 0, start);
                s.writeTo(out);
                System.out.println("OK " + hex(out.array()));
            } catch (Exception e) {
                System.out.println("ERR " + e.toString().replace('\n', ' '));
            }
        }
    }
}
