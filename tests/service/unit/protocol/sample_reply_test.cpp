// Tests of service/protocol/sample_reply.h: the size of a sample reply known before drawing,
// the check that one item fits both an insert and a sample reply frame, the column layout
// (8-byte aligned, zero padding, metadata naming every column's shape and offset), large
// fields sent from the table's rows in place, and a whole plain sample reply.
#include <boost/json.hpp>
#include <catch2/catch.hpp>
#include <cstring>

#include "service/protocol/batch_layout.h"
#include "service/protocol/sample_reply.h"

using namespace replayd;
using namespace replayd::service;
using namespace replayd::service::commands;
using Catch::Contains;

namespace {

namespace json = boost::json;

Schema schema_of(std::vector<Field> fields) {
  auto schema = Schema::create(std::move(fields));
  REQUIRE(schema);
  return std::move(schema).value();
}

TableConfig config_of(Schema schema) {
  TableConfig config;
  config.name = "replay";
  config.schema = std::move(schema);
  config.capacity = 8;
  return config;
}

// The bytes a reply puts on the wire after its header and metadata, in order.
std::vector<std::byte> wire_payload(const Reply& reply) {
  std::vector<asio::const_buffer> buffers;
  reply.gather(buffers);
  std::vector<std::byte> bytes;
  for (std::size_t i = 2; i < buffers.size(); ++i) {
    const auto* data = static_cast<const std::byte*>(buffers[i].data());
    bytes.insert(bytes.end(), data, data + buffers[i].size());
  }
  return bytes;
}

// "the reply to a sample of one item is a frame of at least N bytes": N.
std::uint64_t stated_bytes(const std::string& message) {
  const std::string marker = "a frame of at least ";
  const auto at = message.find(marker);
  REQUIRE(at != std::string::npos);
  return std::stoull(message.substr(at + marker.size()));
}

}  // namespace

TEST_CASE("sample_reply_bytes is the header and every padded column of n draws") {
  const auto schema = schema_of({Field{"x", DType::int64, {}}, Field{"f", DType::uint8, {3}}});
  // key, probability, weight: 8 bytes each; times_sampled 4; x 8; f 3 bytes per row.
  CHECK(sample_reply_bytes(schema, 3) == kHeaderBytes + 24 + 24 + 24 + 16 + 24 + 16);
  CHECK(sample_reply_bytes(schema, 0) == kHeaderBytes);
  CHECK(sample_reply_bytes(schema, UINT64_MAX / 4) == UINT64_MAX);  // overflow saturates
}

TEST_CASE("a table whose item fits the frame limit passes check_item_fits_frames") {
  const auto config = config_of(schema_of({Field{"obs", DType::float32, {84}}}));
  CHECK(check_item_fits_frames(config, std::uint64_t{256} << 20, "table 'replay'").ok());
}

TEST_CASE("an item too large to insert is refused naming its size and the limit") {
  const auto config = config_of(schema_of({Field{"obs", DType::uint8, {1000}}}));
  auto status = check_item_fits_frames(config, 900, "table 'replay'");
  REQUIRE_FALSE(status);
  CHECK(status.error().code == ErrorCode::invalid_argument);
  CHECK_THAT(status.error().message,
             Contains("table 'replay': one item is 1000 bytes") && Contains("an insert") &&
                 Contains("max_frame_bytes = 900") && Contains("never be filled or sampled"));
}

TEST_CASE("the frame size a refusal states is exactly the limit that suffices") {
  const auto config = config_of(schema_of({Field{"obs", DType::uint8, {1000}}}));
  auto insert = check_item_fits_frames(config, 100, "t");
  REQUIRE_FALSE(insert);
  const auto insert_bytes = stated_bytes(insert.error().message);
  auto reply = check_item_fits_frames(config, insert_bytes, "t");
  if (!reply) {
    CHECK_THAT(reply.error().message, Contains("the reply to a sample"));
    const auto reply_bytes = stated_bytes(reply.error().message);
    CHECK(reply_bytes > insert_bytes);
    CHECK(check_item_fits_frames(config, reply_bytes, "t").ok());
    CHECK_FALSE(check_item_fits_frames(config, reply_bytes - 1, "t"));
  } else {
    CHECK_FALSE(check_item_fits_frames(config, insert_bytes - 1, "t"));
  }
}

TEST_CASE("the reply to a sample of one item is never larger than the checked bound") {
  const auto config = config_of(schema_of(
      {Field{"a_long_field_name", DType::float64, {3, 5}}, Field{"q.u-o_ted", DType::int8, {}}}));
  auto table = Table::create(config).value();
  std::vector<double> a(15, 1.0);
  std::vector<std::int8_t> b(1, 2);
  const std::span<const std::byte> columns[] = {std::as_bytes(std::span(a)),
                                                std::as_bytes(std::span(b))};
  std::vector<std::uint64_t> keys(1);
  REQUIRE(table->insert(columns, 1, {}, keys));
  HostedTable hosted(std::move(table));
  auto sample = plain_sample_reply(config.schema, 1);
  REQUIRE(sample);
  REQUIRE(hosted.table->sample(1, 0.4, sample->buffers()));
  const Reply reply = finish_plain_sample(hosted, *sample, 1, UINT32_MAX,
                                          {-1.7976931348623157e308, -2.2250738585072014e-308});
  CHECK(check_item_fits_frames(config, reply.wire_bytes(), "t").ok());
}

TEST_CASE("the sampled state is the size and both masses as shortest numbers") {
  CHECK(sampled_state(5, {2.5, 0.5}) == R"(,"state":{"size":5,"mass":2.5,"min_mass":0.5})");
  CHECK(sampled_state(0, {0, 1}) == R"(,"state":{"size":0,"mass":0,"min_mass":1})");
  CHECK(sampled_state(1, {0.1, 1e-300}) == R"(,"state":{"size":1,"mass":0.1,"min_mass":1e-300})");
}

TEST_CASE("only fields of 4096 bytes or more are viewed, and at most 1024 rows per reply") {
  const auto schema =
      schema_of({Field{"small", DType::uint8, {4095}}, Field{"big", DType::uint8, {4096}},
                 Field{"bigger", DType::float32, {2048}}});
  CHECK(viewed_fields(schema, 1) == std::vector<bool>{false, true, true});
  CHECK(viewed_fields(schema, 512) == std::vector<bool>{false, true, true});
  CHECK(viewed_fields(schema, 513) == std::vector<bool>{false, true, false});
  CHECK(viewed_fields(schema, 1025) == std::vector<bool>{false, false, false});
}

TEST_CASE("column replies are 8-byte aligned with zeroed padding and listed in the metadata") {
  std::vector<ReplyColumn> columns = draw_columns();
  columns.push_back(ReplyColumn{"flags", "uint8", {3}, 3, {}, false});
  auto reply = ColumnReply::create(columns, {3});
  REQUIRE(reply);
  CHECK(reply->offsets() == std::vector<std::uint64_t>{0, 24, 48, 72, 88});
  CHECK(ColumnReply::frame_bytes(columns, {3}) == kHeaderBytes + 88 + 16);
  auto keys = reply->as<std::uint64_t>(0);
  REQUIRE(keys.size() == 3);
  keys[0] = 10;
  keys[1] = 11;
  keys[2] = 12;
  auto flags = reply->column(4);
  REQUIRE(flags.size() == 9);
  std::memset(flags.data(), 0xab, flags.size());
  for (std::size_t c = 1; c < 4; ++c) {
    auto bytes = reply->column(c);
    std::memset(bytes.data(), 1, bytes.size());
  }
  const Reply finished = reply->finish(7, R"(,"extra":true)");
  CHECK(finished.request_id == 7);
  CHECK_FALSE(finished.borrows());
  const auto payload = wire_payload(finished);
  REQUIRE(payload.size() == 104);
  for (std::size_t i = 84; i < 88; ++i)
    CHECK(payload[i] == std::byte{0});  // times_sampled padding
  for (std::size_t i = 97; i < 104; ++i)
    CHECK(payload[i] == std::byte{0});  // flags padding
  std::uint64_t second_key;
  std::memcpy(&second_key, payload.data() + 8, 8);
  CHECK(second_key == 11);

  const json::value meta = json::parse(finished.meta);
  CHECK(meta.at("n").as_int64() == 3);
  CHECK(meta.at("extra").as_bool());
  const auto& listed = meta.at("columns").as_array();
  REQUIRE(listed.size() == 5);
  CHECK(listed[0].at("name").as_string() == "key");
  CHECK(listed[0].at("dtype").as_string() == "uint64");
  CHECK(listed[3].at("name").as_string() == "times_sampled");
  CHECK(listed[3].at("dtype").as_string() == "uint32");
  CHECK(listed[4].at("shape") == json::parse("[3, 3]"));
  CHECK(listed[4].at("offset").as_int64() == 88);
}

TEST_CASE("columns with their own leading dimensions are sized and listed by them") {
  std::vector<ReplyColumn> columns = draw_columns({2, 5});
  columns.push_back(ReplyColumn{"window", "float32", {}, 4, {2, 5, 3}, false});
  auto reply = ColumnReply::create(columns, {2});
  REQUIRE(reply);
  CHECK(reply->column(0).size() == 2 * 5 * 8);
  CHECK(reply->column(4).size() == 2 * 5 * 3 * 4);
  const Reply finished = reply->finish(1, "");
  const json::value meta = json::parse(finished.meta);
  CHECK(meta.at("n").as_int64() == 2);
  CHECK(meta.at("columns").as_array()[0].at("shape") == json::parse("[2, 5]"));
  CHECK(meta.at("columns").as_array()[4].at("shape") == json::parse("[2, 5, 3]"));
}

TEST_CASE("extending a column reply keeps the existing columns' contents") {
  auto reply = ColumnReply::create({ReplyColumn{"a", "int32", {}, 4, {}, false}}, {3});
  REQUIRE(reply);
  auto a = reply->as<std::int32_t>(0);
  a[0] = 1;
  a[1] = 2;
  a[2] = 3;
  auto first = reply->extend({ReplyColumn{"b", "int64", {}, 8, {}, false}});
  REQUIRE(first);
  CHECK(*first == 1);
  auto kept = reply->as<std::int32_t>(0);
  CHECK(std::vector<std::int32_t>(kept.begin(), kept.end()) == std::vector<std::int32_t>{1, 2, 3});
  CHECK(reply->column(1).size() == 24);
  CHECK(reply->offsets() == std::vector<std::uint64_t>{0, 16});
}

TEST_CASE("a column reply laid out in a region writes its columns there and sends none") {
  std::vector<ReplyColumn> columns = draw_columns();
  columns.push_back(ReplyColumn{"flags", "uint8", {3}, 3, {}, false});
  // The same layout as the frame's payload, within the region: 104 bytes, padding zeroed.
  std::vector<std::byte> region(128, std::byte{0xee});
  auto reply = ColumnReply::create_in(columns, {3}, region);
  REQUIRE(reply);
  CHECK(reply->payload_bytes() == 104);
  CHECK(reply->offsets() == std::vector<std::uint64_t>{0, 24, 48, 72, 88});
  reply->as<std::uint64_t>(0)[1] = 11;
  std::memset(reply->column(4).data(), 0xab, 9);
  CHECK(reply->column(4).data() == region.data() + 88);
  for (std::size_t i = 97; i < 104; ++i)
    CHECK(region[i] == std::byte{0});     // flags padding
  CHECK(region[104] == std::byte{0xee});  // past the columns: untouched
  std::uint64_t second_key;
  std::memcpy(&second_key, region.data() + 8, 8);
  CHECK(second_key == 11);
  const Reply finished = reply->finish(5, R"(,"into":{})");
  CHECK(finished.payload_bytes() == 0);
  CHECK_FALSE(finished.borrows());
  CHECK(json::parse(finished.meta).at("columns").as_array()[4].at("offset").as_int64() == 88);
  CHECK_FALSE(reply->extend({ReplyColumn{"b", "int64", {}, 8, {}, false}}));
}

TEST_CASE("a region too small for the columns is refused naming both sizes") {
  std::vector<std::byte> region(100);
  auto reply = ColumnReply::create_in(draw_columns(), {4}, region);
  REQUIRE_FALSE(reply);
  CHECK(reply.error().code == ErrorCode::invalid_argument);
  CHECK_THAT(reply.error().message, Contains("take 112 bytes") && Contains("holds 100"));
}

TEST_CASE("a plain sample reply into a region copies every field, large ones too") {
  const auto schema = schema_of({Field{"x", DType::int64, {}}, Field{"big", DType::uint8, {8192}}});
  std::vector<std::byte> region(sample_reply_bytes(schema, 2) - kHeaderBytes);
  auto sample = plain_sample_reply(schema, 2, true, false, true, region);
  REQUIRE(sample);
  REQUIRE(sample->columns.size() == 2);
  CHECK(sample->columns[1].size() == 2 * 8192);  // not viewed: written into the region
  CHECK(sample->columns[1].data() >= region.data());
  CHECK(sample->columns[1].data() + sample->columns[1].size() <= region.data() + region.size());
  CHECK(sample->rows[1].empty());
}

TEST_CASE("a reply of no rows has empty columns and a payload of nothing") {
  auto reply = ColumnReply::create(draw_columns(), {0});
  REQUIRE(reply);
  CHECK(reply->column(0).empty());
  const Reply finished = reply->finish(2, "");
  CHECK(finished.payload_bytes() == 0);
  CHECK(json::parse(finished.meta).at("n").as_int64() == 0);
}

TEST_CASE("viewed columns go out as the table's rows, padded, and settle into an owned copy") {
  std::vector<ReplyColumn> columns{ReplyColumn{"id", "uint8", {}, 1, {}, false},
                                   ReplyColumn{"frame", "uint8", {5}, 5, {}, true}};
  auto reply = ColumnReply::create(columns, {2});
  REQUIRE(reply);
  auto id = reply->column(0);
  id[0] = std::byte{1};
  id[1] = std::byte{2};
  const std::byte first[5]{std::byte{'a'}, std::byte{'b'}, std::byte{'c'}, std::byte{'d'},
                           std::byte{'e'}};
  const std::byte second[5]{std::byte{'v'}, std::byte{'w'}, std::byte{'x'}, std::byte{'y'},
                            std::byte{'z'}};
  auto rows = reply->rows(1);
  REQUIRE(rows.size() == 2);
  rows[0] = first;
  rows[1] = second;
  Reply finished = reply->finish(3, "");
  REQUIRE(finished.borrows());
  CHECK(finished.payload_bytes() == 8 + 16);
  const auto payload = wire_payload(finished);
  REQUIRE(payload.size() == 24);
  CHECK(payload[0] == std::byte{1});
  CHECK(payload[1] == std::byte{2});
  CHECK(payload[8] == std::byte{'a'});
  CHECK(payload[13] == std::byte{'v'});
  for (std::size_t i = 18; i < 24; ++i)
    CHECK(payload[i] == std::byte{0});
  finished.settle();
  CHECK_FALSE(finished.borrows());
  CHECK(wire_payload(finished) == payload);
}

TEST_CASE("a plain sample reply carries the draws, every field and the state, meta cached per n") {
  const auto config =
      config_of(schema_of({Field{"id", DType::int64, {}}, Field{"pixels", DType::uint8, {4096}}}));
  auto table = Table::create(config).value();
  std::vector<std::int64_t> ids{40, 41};
  std::vector<std::uint8_t> pixels(2 * 4096);
  for (std::size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<std::uint8_t>(i / 4096 + 1);
  const std::span<const std::byte> columns[] = {std::as_bytes(std::span(ids)),
                                                std::as_bytes(std::span(pixels))};
  std::vector<std::uint64_t> keys(2);
  REQUIRE(table->insert(columns, 2, {}, keys));
  HostedTable hosted(std::move(table));

  auto sample = plain_sample_reply(config.schema, 3);
  REQUIRE(sample);
  REQUIRE(sample->columns[0].size() == 3 * 8);
  CHECK(sample->columns[1].empty());  // pixels are viewed in the table
  CHECK(sample->rows[1].size() == 3);
  REQUIRE(hosted.table->sample(3, 0.4, sample->buffers()));
  Reply reply = finish_plain_sample(hosted, *sample, 9, 2, {2, 1});
  CHECK(hosted.cached_sample_n == 3);
  const std::string cached = hosted.cached_sample_meta;

  const json::value meta = json::parse(reply.meta);
  CHECK(meta.at("n").as_int64() == 3);
  const auto& listed = meta.at("columns").as_array();
  REQUIRE(listed.size() == 6);
  CHECK(listed[4].at("name").as_string() == "id");
  CHECK(listed[5].at("name").as_string() == "pixels");
  CHECK(listed[5].at("shape") == json::parse("[3, 4096]"));
  CHECK(meta.at("state").at("size").as_int64() == 2);
  CHECK(meta.at("state").at("mass").to_number<double>() == 2.0);

  const auto payload = wire_payload(reply);
  CHECK(payload.size() == sample_reply_bytes(config.schema, 3) - kHeaderBytes);
  for (int draw = 0; draw < 3; ++draw) {
    std::int64_t id;
    std::memcpy(&id, payload.data() + listed[4].at("offset").as_int64() + 8 * draw, 8);
    REQUIRE((id == 40 || id == 41));
    const auto pixel = payload[listed[5].at("offset").as_int64() + 4096 * draw];
    CHECK(std::to_integer<int>(pixel) == id - 39);  // the row of the same item
  }

  auto again = plain_sample_reply(config.schema, 3);
  REQUIRE(again);
  REQUIRE(hosted.table->sample(3, 0.4, again->buffers()));
  const Reply second = finish_plain_sample(hosted, *again, 10, 2, {2, 1});
  CHECK(hosted.cached_sample_meta == cached);
  CHECK(second.meta == reply.meta);
}
