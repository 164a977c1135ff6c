// Golden outputs from Apache Kafka Connect 3.9.0's own JsonConverter, transformations and predicates.
// Run by tests/golden/regenerate.sh; the output, converters.txt, is read by tests/unit/test_converters.py
// and tests/unit/test_transforms_golden.py. Each line: <kind> <name> <json>.
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.*;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.data.*;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.transforms.Transformation;
import org.apache.kafka.connect.transforms.predicates.Predicate;

public class GoldenConvert {
    static final ObjectMapper M = new ObjectMapper();

    static JsonConverter converter(boolean schemas, String decimalFormat) {
        JsonConverter c = new JsonConverter();
        Map<String, Object> cfg = new HashMap<>();
        cfg.put("schemas.enable", Boolean.toString(schemas));
        cfg.put("decimal.format", decimalFormat);
        c.configure(cfg, false);
        return c;
    }

    static String text(byte[] b) {
        return b == null ? "null" : M.valueToTree(new String(b, StandardCharsets.UTF_8)).toString();
    }

    static Schema allTypes() {
        return SchemaBuilder.struct().name("com.example.All").version(3).doc("every type")
            .field("i8", Schema.INT8_SCHEMA)
            .field("i16", Schema.INT16_SCHEMA)
            .field("i32", Schema.INT32_SCHEMA)
            .field("i64", Schema.INT64_SCHEMA)
            .field("f32", Schema.FLOAT32_SCHEMA)
            .field("f64", Schema.FLOAT64_SCHEMA)
            .field("flag", Schema.BOOLEAN_SCHEMA)
            .field("s", Schema.STRING_SCHEMA)
            .field("b", Schema.BYTES_SCHEMA)
            .field("arr", SchemaBuilder.array(Schema.INT32_SCHEMA).build())
            .field("m", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT64_SCHEMA).build())
            .field("opt", Schema.OPTIONAL_STRING_SCHEMA)
            .field("dflt", SchemaBuilder.int32().optional().defaultValue(7).build())
            .field("dec", Decimal.schema(2))
            .field("date", Date.SCHEMA)
            .field("time", Time.SCHEMA)
            .field("ts", Timestamp.SCHEMA)
            .field("inner", SchemaBuilder.struct().optional()
                .field("x", Schema.INT32_SCHEMA).field("y", Schema.OPTIONAL_STRING_SCHEMA).build())
            .build();
    }

    static Struct allValue(Schema s) {
        Struct inner = new Struct(s.field("inner").schema()).put("x", 1).put("y", "why");
        Map<String, Long> m = new LinkedHashMap<>();
        m.put("a", 1L);
        m.put("b", -2L);
        return new Struct(s).put("i8", (byte) -8).put("i16", (short) 300).put("i32", 70000).put("i64", 1L << 40)
            .put("f32", 0.1f).put("f64", 1.0e10).put("flag", true).put("s", "h\u00e9llo \"q\"\n\t\u0001")
            .put("b", new byte[] {0, 1, (byte) 0xff}).put("arr", Arrays.asList(1, 2, 3)).put("m", m)
            .put("opt", null).put("dflt", null).put("dec", new BigDecimal("-12.34"))
            .put("date", new java.util.Date(86400000L * 19000)).put("time", new java.util.Date(3723004L))
            .put("ts", new java.util.Date(1700000000123L)).put("inner", inner);
    }

    static void json() {
        Schema s = allTypes();
        Struct v = allValue(s);
        System.out.println("json envelope_all " + text(converter(true, "BASE64").fromConnectData("t", s, v)));
        System.out.println("json plain_all " + text(converter(false, "BASE64").fromConnectData("t", s, v)));
        System.out.println("json numeric_all " + text(converter(true, "NUMERIC").fromConnectData("t", s, v)));
        System.out.println("json envelope_string " + text(converter(true, "BASE64").fromConnectData("t", Schema.STRING_SCHEMA, "x")));
        System.out.println("json envelope_opt_int64_null " + text(converter(true, "BASE64").fromConnectData("t", Schema.OPTIONAL_INT64_SCHEMA, null)));
        System.out.println("json envelope_null_null " + text(converter(true, "BASE64").fromConnectData("t", null, null)));
        Map<String, Object> schemaless = new LinkedHashMap<>();
        schemaless.put("k", 1L);
        schemaless.put("l", Arrays.asList("a", 2.5));
        System.out.println("json envelope_schemaless " + text(converter(true, "BASE64").fromConnectData("t", null, schemaless)));
        System.out.println("json envelope_doubles " + text(converter(true, "BASE64").fromConnectData("t",
            SchemaBuilder.array(Schema.FLOAT64_SCHEMA).build(), Arrays.asList(1e-5, 1e7, 123456.789, 0.0, -2.5, 1e21))));
        for (String bad : new String[] {"{\"payload\":1}", "{\"schema\":null,\"payload\":1,\"x\":2}", "[1]", "{not json"}) {
            try {
                converter(true, "BASE64").toConnectData("t", bad.getBytes(StandardCharsets.UTF_8));
                System.out.println("error " + M.valueToTree(bad) + " " + M.valueToTree("none"));
            } catch (Exception e) {
                System.out.println("error " + M.valueToTree(bad) + " " + M.valueToTree(e.getClass().getName() + ": " + e.getMessage()));
            }
        }
    }

    static String dump(Schema schema, Object value) {
        byte[] b = converter(true, "BASE64").fromConnectData("t", schema, value);
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void smt(String name, Transformation t, Map<String, String> cfg, SinkRecord r) {
        t.configure(cfg);
        ConnectRecord out = t.apply(r);
        ObjectNode o = M.createObjectNode();
        o.put("config", M.valueToTree(cfg));
        if (out == null) {
            o.putNull("record");
        } else {
            ObjectNode rec = o.putObject("record");
            rec.put("topic", out.topic());
            rec.put("key", dump(out.keySchema(), out.key()));
            rec.put("value", dump(out.valueSchema(), out.value()));
            rec.put("timestamp", out.timestamp());
        }
        System.out.println("smt " + name + " " + o);
    }

    static Transformation tf(String cls) throws Exception {
        return (Transformation) Class.forName("org.apache.kafka.connect.transforms." + cls).getDeclaredConstructor().newInstance();
    }

    static Map<String, String> cfg(String... kv) {
        Map<String, String> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put(kv[i], kv[i + 1]);
        return m;
    }

    static void smts() throws Exception {
        Schema inner = SchemaBuilder.struct().field("city", Schema.STRING_SCHEMA).field("zip", Schema.OPTIONAL_INT32_SCHEMA).build();
        Schema vs = SchemaBuilder.struct().name("Order")
            .field("id", Schema.INT64_SCHEMA).field("name", Schema.STRING_SCHEMA)
            .field("price", Schema.FLOAT64_SCHEMA).field("qty", Schema.INT32_SCHEMA)
            .field("ok", Schema.BOOLEAN_SCHEMA).field("when", Schema.INT64_SCHEMA)
            .field("addr", inner).build();
        Struct v = new Struct(vs).put("id", 42L).put("name", "pen").put("price", 1.5).put("qty", 3)
            .put("ok", true).put("when", 1700000000123L).put("addr", new Struct(inner).put("city", "Oslo").put("zip", 150));
        ConnectHeaders h = new ConnectHeaders();
        h.addString("trace", "abc");
        SinkRecord r = new SinkRecord("orders", 2, Schema.STRING_SCHEMA, "k1", vs, v, 17L, 1700000000999L,
            org.apache.kafka.common.record.TimestampType.CREATE_TIME, h);
        smt("insert_value", tf("InsertField$Value"), cfg("topic.field", "t", "partition.field", "p!", "offset.field", "o",
            "timestamp.field", "ts", "static.field", "sf", "static.value", "sv"), r);
        smt("replace_exclude_rename", tf("ReplaceField$Value"), cfg("exclude", "price,ok", "renames", "id:order_id,name:title"), r);
        smt("replace_include", tf("ReplaceField$Value"), cfg("include", "id,qty"), r);
        smt("mask", tf("MaskField$Value"), cfg("fields", "id,name,price,ok"), r);
        smt("mask_replacement", tf("MaskField$Value"), cfg("fields", "name,qty", "replacement", "9"), r);
        smt("cast_fields", tf("Cast$Value"), cfg("spec", "id:string,price:int32,qty:float64,ok:int8,name:string"), r);
        smt("value_to_key", tf("ValueToKey"), cfg("fields", "id,name"), r);
        smt("extract_value", tf("ExtractField$Value"), cfg("field", "name"), r);
        smt("extract_value_struct", tf("ExtractField$Value"), cfg("field", "addr"), r);
        smt("flatten", tf("Flatten$Value"), cfg("delimiter", "_"), r);
        smt("flatten_default", tf("Flatten$Value"), cfg(), r);
        smt("tsconv_string", tf("TimestampConverter$Value"), cfg("field", "when", "target.type", "string", "format", "yyyy-MM-dd HH:mm:ss.SSS"), r);
        smt("tsconv_timestamp", tf("TimestampConverter$Value"), cfg("field", "when", "target.type", "Timestamp"), r);
        smt("tsconv_date", tf("TimestampConverter$Value"), cfg("field", "when", "target.type", "Date"), r);
        smt("tsconv_time", tf("TimestampConverter$Value"), cfg("field", "when", "target.type", "Time"), r);
        smt("regex_router", tf("RegexRouter"), cfg("regex", "(o)rders", "replacement", "$1-x-$1"), r);
        smt("regex_router_nomatch", tf("RegexRouter"), cfg("regex", "foo", "replacement", "bar"), r);
        smt("timestamp_router", tf("TimestampRouter"), cfg("topic.format", "${topic}-${timestamp}", "timestamp.format", "yyyyMMdd"), r);
        smt("insert_key_static", tf("InsertField$Key"), cfg("static.field", "sf", "static.value", "sv"),
            new SinkRecord("orders", 2, SchemaBuilder.struct().field("a", Schema.INT32_SCHEMA).build(),
                new Struct(SchemaBuilder.struct().field("a", Schema.INT32_SCHEMA).build()).put("a", 1), vs, v, 17L));
        smt("cast_whole", tf("Cast$Key"), cfg("spec", "int64"), new SinkRecord("orders", 2, Schema.STRING_SCHEMA, "123", vs, v, 17L));
        smt("filter", tf("Filter"), cfg(), r);
        // Schemaless values (maps), as the JSON converter with schemas.enable=false produces them.
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", 42L);
        m.put("name", "pen");
        Map<String, Object> a = new LinkedHashMap<>();
        a.put("city", "Oslo");
        m.put("addr", a);
        SinkRecord sr = new SinkRecord("orders", 2, null, "k1", null, m, 17L, 1700000000999L,
            org.apache.kafka.common.record.TimestampType.CREATE_TIME);
        smt("schemaless_insert", tf("InsertField$Value"), cfg("topic.field", "t", "offset.field", "o"), sr);
        smt("schemaless_flatten", tf("Flatten$Value"), cfg(), sr);
        smt("schemaless_mask", tf("MaskField$Value"), cfg("fields", "id,name"), sr);
    }

    @SuppressWarnings({"rawtypes", "unchecked"})
    static void configDefs() throws Exception {
        String[] classes = {"InsertField$Value", "ReplaceField$Value", "MaskField$Value", "Cast$Value", "ValueToKey",
            "ExtractField$Value", "Flatten$Value", "TimestampConverter$Value", "RegexRouter", "TimestampRouter", "Filter",
            "predicates.TopicNameMatches", "predicates.HasHeaderKey", "predicates.RecordIsTombstone"};
        for (String c : classes) {
            Object o = Class.forName("org.apache.kafka.connect.transforms." + c).getDeclaredConstructor().newInstance();
            ConfigDef def = o instanceof Transformation ? ((Transformation) o).config() : ((Predicate) o).config();
            ArrayNode keys = M.createArrayNode();
            for (ConfigDef.ConfigKey k : def.configKeys().values()) {
                ObjectNode n = keys.addObject();
                n.put("name", k.name);
                n.put("type", k.type.name());
                n.put("default", k.hasDefault() ? String.valueOf(ConfigDef.convertToString(k.defaultValue, k.type)) : "<required>");
                n.put("importance", k.importance.name());
                n.put("doc", k.documentation);
                n.put("validator", k.validator == null ? null : k.validator.toString());
            }
            System.out.println("configdef " + c + " " + keys);
        }
    }

    public static void main(String[] args) throws Exception {
        json();
        smts();
        configDefs();
    }
}
